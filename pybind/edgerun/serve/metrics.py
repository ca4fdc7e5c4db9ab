"""Counters, gauges and histograms, written in the Prometheus text format
(version 0.0.4) for GET /metrics. Kept here rather than through
prometheus_client: a handful of series, and no process-wide registry that two
servers in one process (the tests) would share."""
import threading

PREFIX = "edgerun_"

# name -> (type, help, histogram buckets in seconds)
SERIES = {
    "requests_total": ("counter", "HTTP requests answered, by endpoint and status code", None),
    "jobs_total": ("counter", "generation jobs ended, by reason (stop, length, cancelled, error)", None),
    "rejected_total": ("counter", "requests refused with 429 because the wait queue was full", None),
    "prompt_tokens_total": ("counter", "prompt tokens of admitted jobs", None),
    "prompt_tokens_reused_total": ("counter", "prompt tokens found in a slot's cache (not prefilled again)", None),
    "generation_tokens_total": ("counter", "tokens generated", None),
    "queue_depth": ("gauge", "jobs waiting for a slot", None),
    "slots_busy": ("gauge", "slots running a job", None),
    "slots_total": ("gauge", "slots planned at open (--parallel)", None),
    "request_duration_seconds": ("histogram", "time from request to last byte, generation endpoints",
                                 (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120)),
    "queue_wait_seconds": ("histogram", "time a job waited for a slot",
                           (.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)),
    "time_to_first_token_seconds": ("histogram", "time from submission to the first sampled token",
                                    (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)),
    "time_per_output_token_seconds": ("histogram", "time between two sampled tokens of a job",
                                      (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1)),
}


def _labels(labels):
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels))
    return "{" + inner + "}"


def _escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v):
    return repr(float(v)) if isinstance(v, float) else str(v)


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self._values = {}        # (name, labels) -> number
        self._hist = {}          # (name, labels) -> [bucket counts..., sum, count]

    def inc(self, name, by=1, **labels):
        key = (name, tuple(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0) + by

    def set_gauge(self, name, value, **labels):
        with self._lock:
            self._values[(name, tuple(labels.items()))] = value

    def observe(self, name, value, **labels):
        buckets = SERIES[name][2]
        key = (name, tuple(labels.items()))
        with self._lock:
            h = self._hist.setdefault(key, [0] * len(buckets) + [0.0, 0])
            for i, b in enumerate(buckets):
                if value <= b:
                    h[i] += 1
            h[-2] += value
            h[-1] += 1

    def value(self, name, **labels):
        """A counter's or gauge's current value (0 when never set), or a
        histogram's count."""
        key = (name, tuple(labels.items()))
        with self._lock:
            if key in self._hist:
                return self._hist[key][-1]
            return self._values.get(key, 0)

    def text(self):
        lines = []
        with self._lock:
            for name, (kind, help_, buckets) in SERIES.items():
                full = PREFIX + name
                lines.append(f"# HELP {full} {help_}")
                lines.append(f"# TYPE {full} {kind}")
                if kind == "histogram":
                    for (n, labels), h in sorted(self._hist.items()):
                        if n != name:
                            continue
                        for b, c in zip(buckets, h):
                            lines.append(f"{full}_bucket{_labels(labels + (('le', _num(float(b))),))} {c}")
                        lines.append(f"{full}_bucket{_labels(labels + (('le', '+Inf'),))} {h[-1]}")
                        lines.append(f"{full}_sum{_labels(labels)} {_num(float(h[-2]))}")
                        lines.append(f"{full}_count{_labels(labels)} {h[-1]}")
                else:
                    series = [(labels, v) for (n, labels), v in sorted(self._values.items()) if n == name]
                    if not series and kind == "gauge":
                        series = [((), 0)]
                    for labels, v in series:
                        lines.append(f"{full}{_labels(labels)} {_num(v)}")
        return "\n".join(lines) + "\n"
