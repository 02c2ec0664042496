"""The Celery app of tests/celery: a few tasks, run by a worker that run.py starts.

The broker and the result backend are both the server at CELERY_CHECK_URL (for example
redis://127.0.0.1:6379/0) through kombu's Redis transport, and the next database of the
same server (.../1) through Celery's Redis result backend, both with their default
settings (result expiry included) but for three queues.

Besides returning results, the worker keeps two records in the server, apart from Celery's
own keys, with a plain redis-py client:
  check:runs      a hash, task id -> how many times the task body started (a task lost or
                  run twice shows there);
  check:received  a list, the tags of the pre-queued `record` tasks in the order in which
                  the worker received them (the order of kombu's BRPOP over the queues and
                  their priority lists).
"""

import os
import time
from urllib.parse import urlsplit

import redis
from celery import Celery, signals
from kombu import Queue

URL = os.environ.get("CELERY_CHECK_URL", "redis://127.0.0.1:6379/0")
_url = urlsplit(URL)
BACKEND_URL = _url._replace(path=f"/{int(_url.path.strip('/') or 0) + 1}").geturl()

app = Celery("check", broker=URL, backend=BACKEND_URL)
if os.environ.get("CELERY_CHECK_VISIBILITY"):
    # a worker that takes back, as it starts, the messages left unacknowledged (by a
    # worker that died) for more than this many seconds
    app.conf.broker_transport_options = {
        "visibility_timeout": float(os.environ["CELERY_CHECK_VISIBILITY"])
    }
app.conf.update(
    task_queues=(Queue("celery"), Queue("q.high"), Queue("q.low")),
    task_default_queue="celery",
    task_routes={"app.route_high": {"queue": "q.high"}},
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
)

_records = None


def records():
    global _records
    if _records is None:
        _records = redis.Redis.from_url(URL)
    return _records


@signals.task_prerun.connect
def count_run(task_id=None, **_):
    records().hincrby("check:runs", task_id, 1)


@signals.task_received.connect
def note_received(request=None, **_):
    if request is not None and request.name == "app.record":
        records().rpush("check:received", request.args[0])


@app.task
def add(x, y):
    return x + y


@app.task
def mul(x, y):
    return x * y


@app.task
def tsum(values):
    return sum(values)


@app.task
def echo(value):
    return value


@app.task
def record(tag):
    return tag


@app.task(bind=True)
def where(self):
    """The queue (routing key) the task came from."""
    return self.request.delivery_info.get("routing_key")


@app.task
def route_high():
    return "high"


@app.task(bind=True)
def when(self):
    """When the task ran (seconds since the epoch) and the ETA it had, if any."""
    return {"ran": time.time(), "eta": self.request.eta}


@app.task(bind=True, max_retries=5)
def flaky(self, succeed_on):
    """Fails (retrying after 0.2 s) until its attempt number succeed_on (1-based)."""
    attempt = self.request.retries + 1
    if attempt < succeed_on:
        raise self.retry(exc=RuntimeError(f"attempt {attempt}"), countdown=0.2)
    return attempt


@app.task
def fail(message):
    raise ValueError(message)


@app.task(ignore_result=True)
def quiet(value):
    return value


@app.task(bind=True)
def replaced(self, x):
    """Replaces itself with add(x, 100)."""
    raise self.replace(add.s(x, 100))


@app.task(bind=True, acks_late=True)
def hangs_once(self):
    """Acknowledged once it returns; its first run hangs (its worker is killed then)."""
    runs = int(records().hget("check:runs", self.request.id) or 0)
    if runs == 1:
        time.sleep(60)
    return {"runs": runs, "redelivered": bool(self.request.delivery_info.get("redelivered"))}


@app.task
def slow(seconds):
    time.sleep(seconds)
    return seconds
