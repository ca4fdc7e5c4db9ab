"""The scheduler: one thread owns the model and its slots; requests reach it
through a bounded queue, and their output leaves through each job's emit().

Each turn of the loop is one STEP over the busy slots:
  * a slot that is generating contributes one token (the one it sampled last);
  * slots still prefilling share a budget of prompt tokens, the prompt with
    the fewest tokens left first (oldest first among equals). A short request
    that arrives while a long prompt is coming in is prefilled in the next
    step instead of waiting for the long one's remaining chunks (measured with
    FIFO order: 2.7-3.5 s to its first token behind a 1,000-token prompt). The
    long prompt still advances with whatever budget the short ones leave, and
    at most parallel-1 other jobs can be ahead of it, so it cannot starve.
So a 1,000-token prompt is prefilled over many steps, and between two of its
chunks every generating slot advances one token: a long prompt delays the
others' next token by one chunk, never by the whole prompt.

The budget is set in time, not tokens: a step's prompt chunk may take at
most `prefill_share` of the time its decode tokens take (measured: moving
averages of seconds per decode token and per prompt token), so the running
clients' per-token latency rises by at most about that share while a long
prompt comes in; at most `prefill_chunk` tokens, at least one. With no slot
generating, a prompt gets the whole `prefill_chunk` every step.

step() runs all of a step's work as one er_decode_batch call (one forward
pass for every slot's session: each weight is streamed once for all of
them), in several only where the step's rows exceed the model's n_batch. A
call that fails appends nothing; its slots then go one er_decode each, so a
slot whose request cannot go on (a full context) fails alone. The time
budget above is measured per step: a step with only decode tokens, and how
much a prompt chunk riding along adds to it (far less than alone).

Cancellation: job.cancel() (a client that went away) marks the job; the loop
drops it before the next step, so its slot is free for the next job at once
(after at most the step that was running). The slot keeps the cache of
everything decoded so far, which is consistent: ids are recorded only after
the step's decode call succeeds.
"""
import collections
import itertools
import logging
import threading
import time

from .binding import check, errors, ffi, lib, sampling
from .slots import Slot
from .text import TextOut

log = logging.getLogger("edgerun.serve")


class QueueFull(Exception):
    """The wait queue holds its maximum; the client should retry later."""


class Job:
    """One request on its way through the scheduler.

    emit(event) is called on the scheduler thread with ("piece", text),
    ("done", finish_reason, usage) or ("error", message); it must not block
    (the app hands events over to the event loop)."""

    _ids = itertools.count(1)

    def __init__(self, ids, max_tokens, temperature, top_p, seed, stops, emit, ignore_eos=False, continuing=True):
        self.id = next(Job._ids)
        self.ids = list(ids)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.stops = list(stops)
        self.ignore_eos = bool(ignore_eos)
        self.continuing = bool(continuing)     # the text continues the prompt (completions), see TextOut
        self.emit = emit
        self.cancelled = False
        # scheduler state
        self.pending = []          # prompt ids still to prefill
        self.next_id = None        # sampled, not yet decoded
        self.n_generated = 0
        self.n_reused = 0
        self.out = None
        self.params = None
        self.t_submit = time.perf_counter()
        self.t_start = None
        self.t_first = None
        self.t_last = None
        self.finish_reason = None

    def cancel(self):
        self.cancelled = True


class Scheduler:
    """parallel slots over `model` (opened with n_sessions >= parallel),
    queue_size jobs waiting at most. metrics: a Metrics (or None)."""

    def __init__(self, model, parallel=1, queue_size=16, prefill_chunk=64, prefill_share=0.5, metrics=None):
        if parallel < 1 or queue_size < 0 or prefill_chunk < 1 or not prefill_share > 0:
            raise errors.InvalidArgumentError(
                f"parallel >= 1, queue_size >= 0, prefill_chunk >= 1 and prefill_share > 0, got {parallel}, "
                f"{queue_size}, {prefill_chunk}, {prefill_share}", -1)
        self.model = model
        self.tokenizer = model.tokenizer
        self.vocab = model._vocab
        self.n_ctx = model.n_ctx
        self.parallel = int(parallel)
        self.queue_size = int(queue_size)
        self.prefill_chunk = int(prefill_chunk)
        self.prefill_share = float(prefill_share)
        self._s_decode = None          # moving average: seconds of a step of decode tokens only
        self._s_prompt = None          # moving average: seconds a prompt token adds to a step
        self.n_batch = int(model.plan()["n_batch"])
        self.metrics = metrics
        self._cv = threading.Condition()
        self._queue = collections.deque()
        self._stop = False
        self.slots = []
        self._ready = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(target=self._main, name="edgerun-serve-scheduler", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error

    # ------------------------------------------------------------ any thread
    def submit(self, job):
        """Queues a job; QueueFull when queue_size jobs already wait."""
        with self._cv:
            if self._stop:
                raise errors.StateError("the server is stopping", -10)
            if len(self._queue) >= self.queue_size and not self._free_slot_locked():
                raise QueueFull(f"{len(self._queue)} requests are waiting for {self.parallel} slots")
            self._queue.append(job)
            self._gauges_locked()
            self._cv.notify()

    def cancel(self, job):
        """The client went away: the job stops before the next step."""
        job.cancel()
        with self._cv:
            self._cv.notify()

    def state(self):
        with self._cv:
            return {"slots": self.parallel, "slots_busy": sum(s.job is not None for s in self.slots),
                    "queue": len(self._queue), "queue_size": self.queue_size}

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join()

    # ------------------------------------------------------------ the thread
    def _free_slot_locked(self):
        # A slot is only free for the queue when nothing waits before it.
        return not self._queue and any(s.job is None for s in self.slots)

    def _gauges_locked(self):
        if self.metrics is not None:
            self.metrics.set_gauge("queue_depth", len(self._queue))
            self.metrics.set_gauge("slots_busy", sum(s.job is not None for s in self.slots))

    def _main(self):
        try:
            for i in range(self.parallel):
                self.slots.append(Slot(self.model, i))
        except BaseException as e:      # noqa: BLE001 -- reported to the constructor
            for s in self.slots:
                s.close()
            if isinstance(e, errors.BusyError):
                e = errors.InvalidArgumentError(
                    f"{self.parallel} slots need {self.parallel} free sessions of the model, and only "
                    f"{len(self.slots)} were; open it with n_sessions >= parallel", -1)
            self._startup_error = e
            self._ready.set()
            return
        if self.metrics is not None:
            self.metrics.set_gauge("slots_total", self.parallel)
        self._ready.set()
        try:
            while True:
                with self._cv:
                    self._drop_cancelled_locked()
                    self._admit_locked()
                    self._gauges_locked()
                    if self._stop:
                        break
                    if not any(s.job is not None for s in self.slots):
                        self._cv.wait()
                        continue
                work = self._plan()
                try:
                    self.step(work)
                except Exception as e:    # noqa: BLE001 -- a bug here must not stop the server
                    self._fail_step(work, e)
        finally:
            with self._cv:
                for job in list(self._queue):
                    self._end(job, None, "error", "the server stopped")
                self._queue.clear()
                for s in self.slots:
                    if s.job is not None:
                        self._end(s.job, s, "error", "the server stopped")
                    s.close()

    def _drop_cancelled_locked(self):
        for job in [j for j in self._queue if j.cancelled]:
            self._queue.remove(job)
            self._end(job, None, "cancelled")
        for s in self.slots:
            if s.job is not None and s.job.cancelled:
                self._end(s.job, s, "cancelled")

    def _admit_locked(self):
        while self._queue:
            free = [s for s in self.slots if s.job is None]
            if not free:
                return
            job = self._queue.popleft()
            # The free slot whose cache shares the most with the prompt; among
            # equals the one idle longest (its cache is least likely wanted).
            slot = max(free, key=lambda s: (s.reusable(job.ids), -s.last_used))
            try:
                job.pending = slot.rewind_for(job.ids)
                if job.seed is not None:
                    slot.session.seed(job.seed)
                job.params = sampling(job.temperature, job.top_p)
                job.out = TextOut(self.tokenizer, job.stops, job.continuing)
            except errors.EdgerunError as e:
                slot.clear()
                self._end(job, None, "error", str(e))
                continue
            job.n_reused = len(job.ids) - len(job.pending)
            job.t_start = time.perf_counter()
            slot.job = job
            if self.metrics is not None:
                self.metrics.observe("queue_wait_seconds", job.t_start - job.t_submit)
                self.metrics.inc("prompt_tokens_total", len(job.ids))
                self.metrics.inc("prompt_tokens_reused_total", job.n_reused)

    def _plan(self):
        """The work of one step: [(slot, ids)], decode tokens first, then the
        prefill budget, shortest remaining prompt first."""
        busy = [s for s in self.slots if s.job is not None]
        work = [(s, [s.job.next_id]) for s in busy if not s.job.pending]
        budget = self.prefill_budget(len(work))
        # the whole step in one batched call where the rows fit n_batch
        budget = min(budget, max(1, self.n_batch - len(work)))
        for s in sorted((s for s in busy if s.job.pending), key=lambda s: (len(s.job.pending), s.job.t_start)):
            if budget > 0:
                n = min(budget, len(s.job.pending))
                work.append((s, s.job.pending[:n]))
                budget -= n
        return work

    def prefill_budget(self, n_decode):
        """Prompt tokens for a step that also decodes n_decode tokens."""
        if n_decode == 0:
            return self.prefill_chunk
        if self._s_decode is None or self._s_prompt is None:
            return min(8, self.prefill_chunk)      # a small first chunk, to measure with
        if self._s_prompt <= 0:
            return self.prefill_chunk
        n = int(self.prefill_share * self._s_decode / self._s_prompt)
        return max(1, min(self.prefill_chunk, n))

    def _timed(self, n_decode, n_prompt, seconds):
        # Moving averages over about the last 16 steps: long enough to ride
        # out one slow step, short enough to follow a context that grows. A
        # prompt token's cost is what it adds to a step of decode tokens.
        def avg(old, new):
            return new if old is None else old + (new - old) / 16
        if n_prompt == 0:
            self._s_decode = avg(self._s_decode, seconds)
        elif n_decode == 0:
            self._s_prompt = avg(self._s_prompt, seconds / n_prompt)
        elif self._s_decode is not None:
            self._s_prompt = avg(self._s_prompt, max(seconds - self._s_decode, 0.0) / n_prompt)

    def _groups(self, work):
        """work cut into runs whose rows fit n_batch (one run, normally)."""
        group, rows = [], 0
        for slot, ids in work:
            if group and rows + len(ids) > self.n_batch:
                yield group
                group, rows = [], 0
            group.append((slot, ids))
            rows += len(ids)
        if group:
            yield group

    # ------------------------------------------------------------ one step
    def step(self, work):
        """One forward step for every (slot, ids) in `work` (one
        er_decode_batch call), then sampling."""
        n_decode = sum(1 for slot, _ in work if not slot.job.pending)
        done = []
        t0 = time.perf_counter()
        for group in self._groups(work):
            done.extend(self._decode(group))
        self._timed(n_decode, sum(len(ids) for _, ids in work) - n_decode, time.perf_counter() - t0)
        for slot, ids in done:
            job = slot.job
            if job.pending:
                del job.pending[:len(ids)]
                if job.pending:
                    continue            # more prompt to prefill: no logits wanted yet
            self._sample(slot, job)

    def _decode(self, group):
        """One er_decode_batch call for group; the (slot, ids) decoded."""
        n = len(group)
        arrs = [ffi.new("int32_t[]", ids) for _, ids in group]
        rc = lib.er_decode_batch([slot.ptr for slot, _ in group], arrs, [len(ids) for _, ids in group], n,
                                 ffi.NULL)
        if rc >= 0:
            for slot, ids in group:
                slot.cache.extend(ids)
            return group
        # nothing was appended: each slot alone, so one that cannot go on fails alone
        done = []
        for (slot, ids), arr in zip(group, arrs):
            rc = lib.er_decode(slot.ptr, arr, len(ids), ffi.NULL)
            if rc < 0:
                msg = ffi.string(lib.er_last_error()).decode("utf-8", "replace")
                slot.clear()
                with self._cv:
                    self._end(slot.job, slot, "error", f"decode failed: {msg}")
                continue
            slot.cache.extend(ids)
            done.append((slot, ids))
        return done

    def _fail_step(self, work, exc):
        """Ends the jobs of a step that raised; their slots start over (what
        their caches hold is unknown)."""
        log.exception("a scheduler step failed")
        with self._cv:
            for slot, _ in work:
                if slot.job is not None:
                    self._end(slot.job, slot, "error", f"{type(exc).__name__}: {exc}")
                try:
                    slot.clear()
                except errors.EdgerunError:
                    slot.cache = []

    def _sample(self, slot, job):
        tok = ffi.new("int32_t *")
        rc = lib.er_sample(slot.ptr, job.params, tok)
        if rc < 0:
            with self._cv:
                self._end(job, slot, "error", ffi.string(lib.er_last_error()).decode("utf-8", "replace"))
            return
        t = int(tok[0])
        now = time.perf_counter()
        if self.metrics is not None:
            if job.t_first is None:
                self.metrics.observe("time_to_first_token_seconds", now - job.t_submit)
            else:
                self.metrics.observe("time_per_output_token_seconds", now - job.t_last)
        if job.t_first is None:
            job.t_first = now
        job.t_last = now
        if not job.ignore_eos and self.vocab is not None and lib.er_vocab_is_eog(self.vocab, t):
            return self._finish(job, slot, "stop")
        job.n_generated += 1
        piece, hit = job.out.feed(t)
        if piece:
            job.emit(("piece", piece))
        if hit:
            return self._finish(job, slot, "stop", flushed=True)
        if job.n_generated >= job.max_tokens or len(slot.cache) >= slot.n_ctx:
            return self._finish(job, slot, "length")
        job.next_id = t

    def _finish(self, job, slot, reason, flushed=False):
        if not flushed:
            tail, hit = job.out.flush()
            if tail:
                job.emit(("piece", tail))
            if hit:
                reason = "stop"
        with self._cv:
            self._end(job, slot, reason)

    def _end(self, job, slot, reason, message=None):
        """Settles a job (with the lock held): tells its client, frees its slot."""
        job.finish_reason = reason
        if slot is not None and slot.job is job:
            slot.job = None
            slot.last_used = time.perf_counter()
        if self.metrics is not None:
            self.metrics.inc("generation_tokens_total", job.n_generated)
            self.metrics.inc("jobs_total", 1, reason=reason)
        try:
            if reason == "error":
                job.emit(("error", message))
            else:
                usage = {"prompt_tokens": len(job.ids), "completion_tokens": job.n_generated,
                         "total_tokens": len(job.ids) + job.n_generated,
                         "prompt_tokens_details": {"cached_tokens": job.n_reused}}
                job.emit(("done", reason, usage))
        except RuntimeError:
            pass                     # the event loop is gone (the server is shutting down)
        self._gauges_locked()


__all__ = ["Scheduler", "Job", "QueueFull"]
