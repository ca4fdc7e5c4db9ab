"""8 concurrent openai clients on 4 slots of the embedded model: the 200
held-out additions, half streamed and half plain, every sum right."""
from concurrent.futures import ThreadPoolExecutor

from serve_helpers import client, metric, need_serve, served  # (puts scripts/ on sys.path)

import addition_task as task  # noqa: E402  isort: skip

need_serve()
MODEL = "edgerun-add"


def test_eight_clients_on_four_slots_every_sum_right():
    held = task.make_problems(task.HELD_OUT_COUNT, task.HELD_OUT_SEED, "test")
    with served(parallel=4, queue_size=8) as (srv, base):
        api = client(base)

        def worker(k):
            out = []
            for a, b in held[k::8]:
                kw = dict(model=MODEL, prompt=task.prompt(a, b), max_tokens=task.MAX_NEW_TOKENS, temperature=0)
                if k % 2:
                    text = "".join(c.choices[0].text for c in api.completions.create(stream=True, **kw))
                else:
                    text = api.completions.create(**kw).choices[0].text
                out.append((a, b, text))
            return out

        with ThreadPoolExecutor(8) as pool:
            results = [r for rs in pool.map(worker, range(8)) for r in rs]
        assert len(results) == len(held)
        wrong = [(task.prompt(a, b), text, a + b) for a, b, text in results if not task.is_correct(a, b, text)]
        assert not wrong, wrong[:10]
        assert metric(base, "jobs_total", reason="stop") == len(held)
        assert metric(base, "rejected_total") == 0
        assert metric(base, "queue_wait_seconds_count") == len(held)
        assert metric(base, "slots_busy") == 0 and metric(base, "queue_depth") == 0
