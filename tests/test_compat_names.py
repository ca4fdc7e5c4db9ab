"""Every name importable from `edgerun` before the package was split into
folders (one module per file in pybind/edgerun/, 2026-12) still is, through
the old path: `from edgerun import reference`, `import edgerun.commands.run`,
`edgerun.convert.permute_qk`, `edgerun.ota.verify`. A user's script or
another branch written against the flat layout must keep working; the new
paths are in edgerun/__init__.py (_MOVED) and README.md's layout section.

The lists below are each old module's public top-level names (functions,
classes, constants) as they were; a name dropped from the package fails here.
"""
import importlib
import subprocess
import sys

import pytest

import edgerun

TOP = ["Model", "Session", "LiveModel", "Tokenizer", "plan", "aligned_buffer", "default_model_path", "errors",
       "__version__"]

OLD = {
    "_ffi": "HEADER LIBRARY check ffi last_error lib",
    "bench": ("DOC_BEGIN DOC_END ENGINES FIGURES GGML_KV_TYPES LLAMA_MISSING MATRIX_CTX MATRIX_TYPES MIX_SHAPES "
        "MIX_TYPES NEAR_MIB SHAPES bench_model fit_to_context format_markdown format_table kv_bytes_per_token "
        "kv_share_text llama_cpp_available machine_info matrix measure_bandwidth measure_core_latency "
        "membw_binary peak_rss_bytes plot prompt_ids round_trips_text rss_bytes run update_doc "
        "weight_bytes_per_token"),
    "bench_cuda": ("TYPES format_markdown main make_models measure_bandwidth run run_edgerun run_llama_cpp "
        "weight_bytes_per_token"),
    "bench_isa": ("BASELINE_CFLAGS BASELINE_NAME DOC_BEGIN DOC_END GEN_TOKENS PLAN PROMPT_TOKENS QUICK_CPUS "
        "QUICK_TYPES REPEAT RUN_TIMEOUT SHAPE SVE128 SVE256 SVE512 TYPES baseline_board ensure_build finish "
        "format_markdown format_text main measure parse_ids plan run_once update_doc write_doc"),
    "bench_tokenizer": ("ALIASES FAMILIES GPT2_PAT TARGET_VS_HF TARGET_VS_TIKTOKEN bench_family default_data_dir "
        "format_table hf_from_sentencepiece hf_tokenizer machine_info main make_corpus parse_families run "
        "tiktoken_gpt2"),
    "board_bench": ("BenchError CALIBRATE_ROUNDS DEFAULT_GEN_TOKENS DEFAULT_PROMPT_TOKENS DEFAULT_REPEAT Runner "
        "WORKLOAD_KEYS baseline_from baseline_matches baseline_path bench_board bench_cpu cpu_label file_sha256 "
        "format_table gates host_info latency_summary load_baseline main median parse_calibration parse_info "
        "parse_stats_line parse_timings per_step_median percentile plot summarize write_outputs"),
    "board_test": ("C_TESTS_NOT_UNDER_QEMU DEFAULT_PROBLEMS LOGITS_ATOL LOGITS_RTOL NATIVE_ONLY_SUITE "
        "QEMU_TIMEOUT_MULTIPLIER check_answers cli_path compare_logits format_table list_c_tests model_path "
        "parse_eval run_board_tests run_c_tests run_eval write_prompts"),
    "boards": ("ACCELERATORS ARCHES Board FEATURES QEMU_BINARIES QEMU_CPU_FEATURES SVE_DEFAULT_BITS "
        "SVE_REQUIRED_BITS TOOLCHAIN_NATIVE board_names boards_dir load load_all load_file parse_cpu_spec "
        "repo_root toolchains_dir validate vector_bits"),
    "build": ("BUILDTYPES BuildConfig COMPILERS SANITIZERS artefacts build built check_cuda_target compile_dir "
        "configure elf_machine ensure_built format_report test_executables"),
    "cli": "ArgumentParser COMMANDS EPILOG build_parser error_line main run",
    "commands": "add_model_options apply_pin default_threads formatter human_bytes model_kwargs parse_pin",
    "commands.bench": "EPILOG main register",
    "commands.bench_tokenizer": "EPILOG main register",
    "commands.boards": "EPILOG check list_boards main register show",
    "commands.build": "EPILOG add_build_options build_kwargs main register",
    "commands.convert": "EPILOG main register",
    "commands.doctor": "diagnose main register",
    "commands.flash": "EPILOG add_target_options main register",
    "commands.info": "EPILOG cuda_info cuda_line describe main register",
    "commands.keygen": "EPILOG main register",
    "commands.package": "EPILOG main register",
    "commands.rollback": "main register",
    "commands.run": "EPILOG main register stats_line",
    "commands.sysroot": "EPILOG main register",
    "commands.test": "EPILOG main register",
    "commands.tokenize": "EPILOG main register",
    "commands.trace": "EPILOG MAX_EVENTS OPS_OUTSIDE_LAYERS OPS_PER_LAYER OPS_PER_RANGE main register ring_events",
    "convert": "ARCHS ConvertError HParams TYPES convert gguf_name permute_qk tensor_type",
    "convert_tokenizer": ("DS_CODER GPT2_RE LLAMA3_RE LLAMA3_RE_CASED PRE_TOKENIZERS QWEN2_RE "
        "TokenizerConversionError add_tokenizer identify_pre read_sentencepiece tokenizer_kv write_vocab_gguf"),
    "cpio": ("CpioError Entry HEADER_LEN MAGIC_CRC MAGIC_NEWC MAX_NAME MODE_FILE TRAILER Writer checksum "
        "copy_entry open_index read_entry read_index"),
    "cuda": "available devices why_none",
    "device_config": ("DEFAULTS DeviceConfig FILE_NAME SCHEMA_VERSION apply_to_run_args dump generate load loads "
        "make open_model validate"),
    "device_python": ("DevicePythonError N_REFERENCE_IDS SHARED_MODEL SHARED_REFERENCE cases environment "
        "examples_dir main run_examples second_model write_q8_0_copy"),
    "errors": ("ArenaTooSmallError BY_STATUS BoardError BufferTooSmallError BusyError ConfigError "
        "ContextFullError CorruptModelError EdgerunError FileAccessError InvalidArgumentError MismatchError "
        "MissingToolError OtaError OutOfMemoryError StateError UnsupportedError from_status"),
    "flash": "SshTarget flash open_target rollback status",
    "interference": "BUSY_OTHER_CPUS BUSY_STEAL describe measure snapshot",
    "keygen": "CERT_NAME KEY_NAME KeygenError fingerprint keygen openssl",
    "kquants": "BLOCK_BYTES F32 QK_K QUANTIZERS dequantize quantize quantize_q4_k quantize_q5_k quantize_q6_k",
    "live": "LiveModel",
    "model": ("ARENA_ALIGN DEFAULT_MODEL_NAME DEVICES MAX_TRACE_EVENTS Model aligned_buffer cpu_mask_of "
        "default_model_path isa_for_device plan"),
    "ota": ("Bundle HISTORY LINK LocalTarget active_slot check_signature check_slot_files health_check history "
        "install record report rollback swap verify"),
    "package": ("COLLECTION CONFIG DEFAULT_HEALTH_PROMPT FORMAT MANIFEST MODES PYTHON_TAR check_version cli_argv "
        "find_runtime package run_health_cli runtime_tar_name sha256_file sign sw_description tar_file_table "
        "version_key"),
    "prereqs": "CHECKS Check DEFAULT_SYSROOT MESON_MIN for_build for_run meson_command ninja_command require sysroot",
    "qemu": "command environment run",
    "reference": ("BLOCKS DEQUANT GGUFModel K_QUANTS TYPE_NAMES dequant_bf16 dequant_f16 dequant_f32 dequant_q4_0 "
        "dequant_q8_0 dequantize forward greedy nbytes quantize_act_q8_0 quantize_act_q8_k rms_norm rope silu"),
    "session": "Session finish prepare sampling",
    "swdesc": "SwDescriptionError parse render",
    "sysroot": ("ARCHES Apt BASE_PACKAGES DEFAULT_MIRROR DEFAULT_SECURITY EXCLUDE KEYRING RECIPE_VERSION "
        "SysrootError WHEELS arch_info assemble check_host_tools debian_suite is_ready parse_depends python_path "
        "python_version read_stamp relink_absolute repo_root resolve sources_list stamp_key sysroot_dir "
        "tree_bytes"),
    "tokenizer": "StreamDecoder Tokenizer",
    "trace_summary": "ORDER render summarize",
}

# Names that went, and why: each was a second entrance that imported upwards.
GONE = {
    # `python -m edgerun.bench_tokenizer`: the verb, reached through the bench
    # module, which made bench import the CLI. `edgerun bench-tokenizer` is it.
    ("bench_tokenizer", "main"),
    # cli.run() was a console-script wrapper nothing used (pyproject names
    # cli:main); `edgerun.cli.run` is now the `run` verb's module.
    ("cli", "run"),
}


def test_top_level_names():
    for name in TOP:
        assert getattr(edgerun, name) is not None, name
    assert set(edgerun.__all__) == set(TOP)


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_module_paths_and_names(old):
    by_import = importlib.import_module(f"edgerun.{old}")
    head, _, rest = old.partition(".")
    by_from = getattr(importlib.import_module(f"edgerun.{head}"), rest) if rest else \
        __import__("edgerun", fromlist=[old]).__dict__[old]
    assert by_from is by_import
    missing = [n for n in OLD[old].split() if (old, n) not in GONE and not hasattr(by_import, n)]
    assert not missing, f"edgerun.{old} lost {missing}"


def test_old_path_is_the_same_module_object():
    """Monkeypatching through an old path must reach the code that runs."""
    from edgerun.convert import reference
    import edgerun.reference as old
    assert old is reference
    import edgerun.commands.trace as old_trace
    from edgerun.cli import trace
    assert old_trace is trace
    assert importlib.import_module("edgerun.board_bench").__name__ == "edgerun.bench.board"


def test_unknown_names_still_fail():
    with pytest.raises(ImportError):
        importlib.import_module("edgerun.no_such_module")
    with pytest.raises(AttributeError):
        edgerun.no_such_name
    with pytest.raises(AttributeError):
        importlib.import_module("edgerun.convert").no_such_name


def test_old_paths_in_a_fresh_interpreter():
    """The first import of the package may be an old path."""
    code = ("import edgerun.board_test as bt, edgerun.commands.run as r, edgerun.device_config as dc\n"
            "from edgerun.bench_tokenizer import make_corpus\n"
            "import edgerun.boards.tests, edgerun.cli.run, edgerun.ota.device_config\n"
            "assert bt is edgerun.boards.tests and r is edgerun.cli.run and dc is edgerun.ota.device_config\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
