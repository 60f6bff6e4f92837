"""The Ray engine's handling of lost work, with a stand-in for Ray (fast; no Ray needed).

A task or actor call lost with its node is resubmitted from its last completed part, at most
``max_resubmits`` times, and recorded as ``lost_attempts``; a slide's own failure or any other
error is not retried. A lost actor gets no call until it answers ``__ray_ready__`` again, and a
call that was only queued on it (it never ran) is resubmitted without counting as a try.
"""

from __future__ import annotations

import itertools

import pytest

from wsikit.batch import ray_engine
from wsikit.batch.ray_engine import RayEngine, is_lost_work
from wsikit.run import BatchConfig


class NodeDiedError(Exception):
    """Named like Ray's: the engine recognises lost work by the exception class name."""


class ActorDiedError(Exception):
    pass


class ActorUnavailableError(Exception):
    """What Ray raises for a call to an actor that is restarting (or was restarted under it)."""


class FakeRef:
    ids = itertools.count()

    def __init__(self, kind, task, outcome, actor=None):
        self.kind, self.task, self.outcome, self.id = kind, task, outcome, next(self.ids)
        self.actor = actor


class ProbeRef:
    """A ``__ray_ready__`` call: ``True``, or the error of an actor that is restarting."""

    def __init__(self, actor, outcome):
        self.actor, self.outcome = actor, outcome


class FakeRay:
    """Just enough of Ray: remote functions/actors whose calls resolve to scripted outcomes."""

    def __init__(self, script):
        self.script = script  # (kind, slide_id) -> list of outcomes, consumed in order
        self.calls = []
        self.actor_calls = []
        self.probes = []

    def _call(self, kind, task, actor=None):
        sid = task["slide"]["slide_id"]
        self.calls.append((kind, sid))
        if actor is not None:
            self.actor_calls.append((sid, actor))
        return FakeRef(kind, task, self.script[(kind, sid)].pop(0), actor)

    def _ready(self, actor):
        self.probes.append(actor)
        return ProbeRef(actor, True)

    def wait(self, refs, num_returns, timeout):
        return list(refs), []

    def get(self, ref):
        if isinstance(ref.outcome, Exception):
            raise ref.outcome
        if isinstance(ref, ProbeRef):
            return ref.outcome
        return {"slide_id": ref.task["slide"]["slide_id"], **ref.outcome}


class Actor:
    def __init__(self, fake, index):
        self.index = index
        self._actor_id = type("I", (), {"hex": lambda _s: f"actor{index}"})()
        self.run = type("M", (), {"remote": lambda _s, task, steps: fake._call("device", task,
                                                                               index)})()
        self.__ray_ready__ = type("M", (), {"remote": lambda _s: fake._ready(index)})()


def make_engine(monkeypatch, script, max_resubmits=3):
    fake = FakeRay(script)
    monkeypatch.setattr(ray_engine, "_import_ray", lambda: fake)
    eng = RayEngine(address=None, devices="cpu", workers=2,
                    config=BatchConfig(steps=("segment", "patch", "features")),
                    max_resubmits=max_resubmits)
    eng._actors = [Actor(fake, 0), Actor(fake, 1)]
    eng._load = [0, 0]
    eng._args = ("job", 600.0, {})
    eng._remote_cpu = type("R", (), {"remote": lambda _s, task, *a: fake._call("cpu", task)})()
    return eng, fake


def task(sid):
    return {"slide": {"slide_id": sid, "path": f"/x/{sid}.svs"}, "previous": {}}


def drain(eng, rounds=1000, timeout=0.0):
    out = []
    for _ in range(rounds):
        if not eng.in_flight():
            return out
        out += eng.wait(timeout=timeout)
    raise AssertionError(f"slides still in flight after {rounds} waits: {eng._refs}")


DONE = {"status": "done", "steps": {"segment": {}, "patch": {}}, "seconds": 1.0, "reused": []}


def test_lost_cpu_and_device_parts_are_resubmitted(monkeypatch):
    eng, fake = make_engine(monkeypatch, {
        ("cpu", "a"): [NodeDiedError("node gone"), DONE],
        ("device", "a"): [ActorDiedError("actor gone"), {**DONE, "seconds": 2.0}],
        ("cpu", "b"): [DONE], ("device", "b"): [{**DONE, "seconds": 3.0}]})
    eng.submit(task("a"))
    eng.submit(task("b"))
    results = {r["slide_id"]: r for r in drain(eng)}
    assert results["a"]["status"] == results["b"]["status"] == "done"
    assert [x["part"] for x in results["a"]["lost_attempts"]] == ["cpu", "device"]
    assert [x["error"] for x in results["a"]["lost_attempts"]] == ["NodeDiedError",
                                                                   "ActorDiedError"]
    assert "lost_attempts" not in results["b"]
    assert results["a"]["seconds"] == 3.0  # CPU part + device part of the attempts that ran
    assert fake.calls.count(("cpu", "a")) == 2 and fake.calls.count(("device", "a")) == 2
    # The resubmitted device part went to the other actor, not the one that just died, which
    # was asked whether it is ready (and is) before it is given work again.
    first, again = [k for s, k in fake.actor_calls if s == "a"]
    assert first != again and eng._load == [0, 0]
    assert fake.probes == [first] and not eng._unready


def test_resubmits_are_bounded_and_other_errors_are_failures(monkeypatch):
    eng, _ = make_engine(monkeypatch, {
        ("cpu", "a"): [NodeDiedError("1"), NodeDiedError("2"), NodeDiedError("3")],
        ("cpu", "b"): [RuntimeError("pickling failed")]}, max_resubmits=2)
    eng.submit(task("a"))
    eng.submit(task("b"))
    results = {r["slide_id"]: r for r in drain(eng)}
    assert results["a"]["status"] == "failed"
    assert results["a"]["error"]["type"] == "NodeDiedError"
    assert len(results["a"]["lost_attempts"]) == 2
    assert results["b"]["status"] == "failed" and "lost_attempts" not in results["b"]
    assert "pickling failed" in results["b"]["error"]["message"]


@pytest.mark.parametrize("exc, lost", [(NodeDiedError(), True), (ActorDiedError(), True),
                                       (RuntimeError(), False), (ValueError(), False)])
def test_lost_work_is_recognised_by_class(exc, lost):
    assert is_lost_work(exc) is lost


class StuckRef(FakeRef):
    """A call that never finishes (a hung read): the fake ``wait`` never returns it."""


class SlowFakeRay(FakeRay):
    def __init__(self, script):
        super().__init__(script)
        self.cancelled, self.killed = [], []

    def _call(self, kind, task, actor=None):
        ref = super()._call(kind, task, actor)
        if ref.outcome == "stuck":
            ref.__class__ = StuckRef
        return ref

    def wait(self, refs, num_returns, timeout):
        return [r for r in refs if not isinstance(r, StuckRef)], []

    def cancel(self, ref, force):
        self.cancelled.append((ref.task["slide"]["slide_id"], force))

    def kill(self, actor, no_restart):
        self.killed.append((actor, no_restart))


@pytest.mark.parametrize("part", ["cpu", "device"])
def test_slide_timeout_stops_the_stuck_part_and_fails_only_that_slide(monkeypatch, part):
    eng, _ = make_engine(monkeypatch, {})
    fake = SlowFakeRay({("cpu", "a"): ["stuck" if part == "cpu" else DONE],
                        ("device", "a"): ["stuck"] if part == "device" else [],
                        ("cpu", "b"): [DONE], ("device", "b"): [{**DONE, "seconds": 3.0}]})
    monkeypatch.setattr(eng, "ray", fake)
    eng._actors = [Actor(fake, 0), Actor(fake, 1)]
    eng._remote_cpu = type("R", (), {"remote": lambda _s, task, *a: fake._call("cpu", task)})()
    eng.slide_timeout = 0.2
    clock = itertools.count(0.0, 0.1)  # every monotonic() call advances 0.1 s
    monkeypatch.setattr(ray_engine.time, "monotonic", lambda: next(clock))
    eng.submit(task("a"))
    eng.submit(task("b"))
    results = {r["slide_id"]: r for r in drain(eng)}
    assert results["b"]["status"] == "done"
    err = results["a"]["error"]
    assert results["a"]["status"] == "failed" and err["type"] == "Timeout"
    assert "0.2 s" in err["message"] and "slide_timeout=" in err["message"]  # Python API
    if part == "cpu":
        assert fake.cancelled == [("a", True)] and fake.killed == []
    else:  # the actor that held the stuck call is restarted, not left hung
        assert fake.cancelled == [] and len(fake.killed) == 1
        assert fake.killed[0][1] is False and eng._load == [0, 0]
    assert not eng._refs and not eng._began


def test_slides_arriving_one_at_a_time_use_every_actor(monkeypatch):
    """Idle actors are given calls in turn (the fewest calls first), not always the first:
    slides whose CPU parts finish one by one still reach every node or GPU."""
    eng, fake = make_engine(monkeypatch, {("device", s): [DONE] for s in "abcd"})
    eng.device_steps, eng.cpu_steps = ["features"], []
    used = []
    for sid in "abcd":
        eng.submit(task(sid))
        used.append(eng._refs[next(reversed(eng._refs))][2])
        assert [r["slide_id"] for r in eng.wait(0)] == [sid]  # done before the next arrives
    assert used == [0, 1, 0, 1]


def test_cpu_parts_are_submitted_only_to_free_cpus(monkeypatch):
    """Two CPUs, one held by the actor: one CPU part at a time (a part queued in Ray would
    have its time limit running while it waits)."""
    eng, fake = make_engine(monkeypatch, {("cpu", "a"): [DONE]})
    eng._actors = eng._actors[:1]
    eng._load = [0]
    eng._n_cpu = 2
    assert (eng.cpu_slots, eng.capacity, eng.idle()) == (1, 2, 1)
    eng.submit(task("a"))
    assert eng.idle() == 0  # its CPU part holds the free CPU
    eng.cpu_steps, eng.device_steps = [], ["features"]  # device parts only: queue on actors
    assert eng.idle() == 1


def test_a_call_queued_behind_another_is_timed_from_its_start(monkeypatch):
    eng, fake = make_engine(monkeypatch, {("device", "a"): [DONE], ("device", "b"): [DONE]})
    eng.device_steps, eng.cpu_steps = ["features"], []
    eng._actors = eng._actors[:1]
    eng._load = [0]
    eng.submit(task("a"))
    eng.submit(task("b"))  # queued on the only actor: its clock has not started
    began = list(eng._began.values())
    assert began[0] is not None and began[1] is None
    first = next(iter(eng._refs))
    eng._refs.pop(first)
    eng._release(first, 0)  # a finishes: b starts now
    assert list(eng._began.values()) != [None] and len(eng._began) == 1


class RestartingRay(SlowFakeRay):
    """Ray restarting a killed actor, on a clock that moves ``step`` seconds per ``wait``
    (and as far as the engine sleeps).

    The calls queued on the actor fail with ``ActorUnavailableError`` ("was restarted"), and
    so does every call and ``__ray_ready__`` sent to it for ``restart_s`` seconds after the
    kill ("is restarting"), as Ray does while the actor's new process sets itself up.
    """

    def __init__(self, script, *, restart_s, step=0.1, hold_lost=False):
        super().__init__(script)
        self.now, self.step, self.restart_s = 0.0, step, restart_s
        self.hold_lost = hold_lost  # the queued calls' failures wait for release_lost()
        self.held = []
        self.down_until = {}  # actor -> when its new process is ready
        self.outstanding = []
        self.sent_while_down = []  # slides whose call went to a restarting actor

    def _down(self, actor):
        return self.now < self.down_until.get(actor, -1.0)

    def _call(self, kind, task, actor=None):
        if actor is not None and self._down(actor):
            sid = task["slide"]["slide_id"]
            self.calls.append((kind, sid))
            self.sent_while_down.append(sid)
            return FakeRef(kind, task, ActorUnavailableError("The actor is restarting."), actor)
        ref = super()._call(kind, task, actor)
        self.outstanding.append(ref)
        return ref

    def _ready(self, actor):
        self.probes.append(actor)
        return ProbeRef(actor, ActorUnavailableError("The actor is restarting.")
                        if self._down(actor) else True)

    def kill(self, actor, no_restart):
        super().kill(actor, no_restart)
        self.down_until[actor.index] = self.now + self.restart_s
        for ref in self.outstanding:
            if ref.actor == actor.index:
                ref.__class__ = FakeRef  # a stuck call ends too
                ref.outcome = ActorUnavailableError("The actor was restarted.")
                if self.hold_lost:
                    self.held.append(ref)
        self.outstanding = [r for r in self.outstanding if r.actor != actor.index]

    def sleep(self, seconds):
        self.now += seconds

    def release_lost(self):
        self.held, self.hold_lost = [], False

    def wait(self, refs, num_returns, timeout):
        """An actor runs its calls one at a time: one ends per wait, the next only after."""
        self.now += self.step
        ready, running = [], set()
        for ref in refs:
            if ref in self.held:
                continue
            if ref in self.outstanding:
                if ref.actor in running or isinstance(ref, StuckRef):
                    running.add(ref.actor)
                    continue
                running.add(ref.actor)
                self.outstanding.remove(ref)
            ready.append(ref)
        return ready, []


def restarting_engine(monkeypatch, script, restart_s, hold_lost=False):
    """One CPU actor running only device steps; slide ``a`` hangs on it with ``b`` and ``c``
    queued behind, so the time limit restarts the actor."""
    eng, _ = make_engine(monkeypatch, {})
    fake = RestartingRay(script, restart_s=restart_s, hold_lost=hold_lost)
    monkeypatch.setattr(eng, "ray", fake)
    monkeypatch.setattr(ray_engine.time, "monotonic", lambda: fake.now)
    monkeypatch.setattr(ray_engine.time, "sleep", fake.sleep)
    eng._actors, eng._load = [Actor(fake, 0)], [0]
    eng.device_steps, eng.cpu_steps = ["features"], []
    eng.slide_timeout = 0.25
    for sid in "abc":
        eng.submit(task(sid))
    return eng, fake


def test_calls_queued_on_a_restarted_actor_wait_for_it_and_keep_their_tries(monkeypatch):
    """The actor takes 2 s (20 waits) to restart, longer than the three resubmits a lost
    call has: the queued slides must wait for it, not fail against it while it restarts."""
    eng, fake = restarting_engine(monkeypatch, {("device", "a"): ["stuck"],
                                                ("device", "b"): [DONE, DONE],
                                                ("device", "c"): [DONE, DONE]}, restart_s=2.0)
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    assert results["a"]["status"] == "failed" and results["a"]["error"]["type"] == "Timeout"
    for sid in "bc":  # they never ran on the lost actor: resubmitted, not charged a try
        assert results[sid]["status"] == "done", results[sid]
        assert "lost_attempts" not in results[sid]
    assert fake.sent_while_down == []  # no slide was sent to the actor while it restarted
    assert [sid for sid, _ in fake.actor_calls] == ["a", "b", "c", "b", "c"]
    assert fake.now >= 2.0 and len(fake.probes) >= 2  # it was asked until it answered
    assert eng._load == [0] and not eng._unready and not eng._parked and not eng._doomed


def test_slides_waiting_for_an_actor_that_never_returns_fail_after_the_startup_limit(
        monkeypatch):
    monkeypatch.setattr(ray_engine, "STARTUP_LIMIT", 3.0)
    eng, fake = restarting_engine(monkeypatch, {("device", "a"): ["stuck"],
                                                ("device", "b"): [DONE],
                                                ("device", "c"): [DONE]}, restart_s=1e9)
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    assert results["a"]["error"]["type"] == "Timeout"
    for sid in "bc":
        err = results[sid]["error"]
        assert results[sid]["status"] == "failed" and err["type"] == "ActorUnavailable"
        assert "within 3 s" in err["message"] and "lost_attempts" not in results[sid]
    assert 3.0 < fake.now < 4.0 and fake.sent_while_down == []
    assert not eng.in_flight() and not eng._parked


def test_a_late_failure_from_the_lost_actor_does_not_stop_timing_its_new_calls(monkeypatch):
    """The failures of ``b`` and ``c`` (queued on the killed actor) arrive after it is back
    and has taken ``d`` and ``e``, with ``d``'s result: they must not mark it lost again,
    which would leave ``e``, queued behind ``d``, without a clock. ``e`` hangs, so it must
    still be stopped."""
    eng, fake = restarting_engine(monkeypatch, {("device", "a"): ["stuck"],
                                                ("device", "b"): [DONE] * 3,
                                                ("device", "c"): [DONE] * 3,
                                                ("device", "d"): [DONE],
                                                ("device", "e"): ["stuck"]},
                                  restart_s=1.0, hold_lost=True)
    out = []
    while eng._unready or not fake.killed:  # until the actor was killed and is back
        out += eng.wait(timeout=0.5)
    eng.submit(task("d"))
    eng.submit(task("e"))
    fake.release_lost()
    results = {r["slide_id"]: r for r in out + drain(eng, timeout=0.5)}
    assert [results[s]["status"] for s in "abcde"] == ["failed", "done", "done", "done",
                                                       "failed"]
    assert results["e"]["error"]["type"] == "Timeout" and len(fake.killed) == 2
    assert not any("lost_attempts" in results[s] for s in "bcd")


def _died(init_failed=False):
    """Ray's error for a call to an actor that died (``actor_init_failed``: in ``__init__``)."""
    err = ActorDiedError("The actor died because of an error raised in its creation task: "
                         "ImportError: no torch" if init_failed else
                         "The actor died unexpectedly before finishing this task.")
    err.actor_init_failed = init_failed
    return err


class DyingRay(RestartingRay):
    """Ray whose actors die for good: a call scripted ``"die"`` kills its actor (the call
    fails with ``ActorDiedError``); a call or ``__ray_ready__`` sent to a dead actor fails so
    at once; the GCS actor table says ``DEAD`` (or what ``states`` scripts: a restarting
    actor's probe that raced its death). ``init_failed``: actors whose ``__init__`` raised."""

    def __init__(self, script, *, init_failed=(), states=None):
        super().__init__(script, restart_s=0.0)
        self.dead = set(init_failed)
        self.init_failed = set(init_failed)
        self.states = dict(states or {})  # actor -> list of states the table answers in turn
        self.table = []
        self._private = type("P", (), {"state": type("S", (), {
            "actors": staticmethod(self._actor_table)})()})()

    def _call(self, kind, task, actor=None):
        if actor is not None and actor in self.dead:
            sid = task["slide"]["slide_id"]
            self.calls.append((kind, sid))
            self.actor_calls.append((sid, actor))
            return FakeRef(kind, task, _died(actor in self.init_failed), actor)
        ref = super()._call(kind, task, actor)
        if ref.outcome == "die":
            self.dead.add(actor)
            ref.outcome = _died()
        return ref

    def _ready(self, actor):
        self.probes.append(actor)
        if actor in self.dead or self.states.get(actor):
            return ProbeRef(actor, _died(actor in self.init_failed))
        return ProbeRef(actor, True)

    def _actor_table(self, actor_id):
        k = int(actor_id.removeprefix("actor"))
        self.table.append(k)
        if self.states.get(k):
            return {"State": self.states[k].pop(0)}
        return {"State": "DEAD" if k in self.dead else "ALIVE"}


def dying_engine(monkeypatch, script, actors, **kwargs):
    eng, _ = make_engine(monkeypatch, {})
    fake = DyingRay(script, **kwargs)
    monkeypatch.setattr(eng, "ray", fake)
    monkeypatch.setattr(ray_engine.time, "monotonic", lambda: fake.now)
    monkeypatch.setattr(ray_engine.time, "sleep", fake.sleep)
    eng._actors, eng._load = [Actor(fake, k) for k in range(actors)], [0] * actors
    eng.device_steps, eng.cpu_steps = ["features"], []
    return eng, fake


def test_slides_queued_on_an_actor_dead_for_good_go_to_a_live_one_at_once(monkeypatch):
    """Actor 0 dies running ``a`` and Ray will not restart it: ``c``, queued behind ``a``,
    goes to actor 1 without a try charged; ``a`` (it was running) is one try; actor 0 is
    asked once, found DEAD in Ray's actor table, and never probed or given a slide again."""
    eng, fake = dying_engine(monkeypatch, {("device", "a"): ["die", DONE],
                                           ("device", "b"): [DONE], ("device", "c"): [DONE],
                                           ("device", "d"): [DONE]}, actors=2)
    for sid in "abcd":
        eng.submit(task(sid))
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    assert all(results[s]["status"] == "done" for s in "abcd"), results
    assert [x["error"] for x in results["a"]["lost_attempts"]] == ["ActorDiedError"]
    assert not any("lost_attempts" in results[s] for s in "bcd")
    assert fake.probes == [0] and fake.table == [0] and set(eng._dead) == {0}
    # only a and c, sent before its death was known, went to actor 0
    assert [s for s, k in fake.actor_calls if k == 0] == ["a", "c"]
    assert eng.capacity == eng.cpu_slots + 1 and fake.now < 5.0


def test_slides_fail_at_once_when_no_actor_is_left_alive(monkeypatch):
    """Before, a slide waiting for the only actor, dead for good, waited out the 600-s
    start-up limit (probing it every second); now it fails at once, naming Ray's reason, and
    so does a slide submitted later (no CPU part, no call sent)."""
    eng, fake = dying_engine(monkeypatch, {("device", "a"): ["die"], ("device", "b"): [DONE],
                                           ("device", "c"): [DONE]}, actors=1)
    for sid in "abc":
        eng.submit(task(sid))
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    for sid in "abc":
        err = results[sid]["error"]
        assert results[sid]["status"] == "failed" and err["type"] == "ActorDied", err
        assert "dead for good" in err["message"] and "died unexpectedly" in err["message"]
        assert "retry_failed=True" in err["message"] and "lost_attempts" not in results[sid]
    assert fake.now < 5.0 < ray_engine.STARTUP_LIMIT and fake.probes == [0]
    calls = len(fake.calls)
    eng.submit(task("e"))
    (late,) = drain(eng, timeout=0.5)
    assert late["error"]["type"] == "ActorDied" and len(fake.calls) == calls


@pytest.mark.parametrize("actors", [1, 2])
def test_an_actor_whose_set_up_failed_charges_no_try(monkeypatch, actors):
    """Actor 0's ``__init__`` raised (a missing module): Ray never restarts it. The slides
    sent to it never ran, so they keep their tries: with another actor they are done there,
    with none left they fail at once naming the set-up error."""
    eng, fake = dying_engine(monkeypatch, {("device", s): [DONE] for s in "abc"},
                             actors=actors, init_failed={0})
    for sid in "abc":
        eng.submit(task(sid))
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    assert not any("lost_attempts" in results[s] for s in "abc")
    if actors == 2:
        assert all(results[s]["status"] == "done" for s in "abc")
        # only the calls sent before its failure was known went to actor 0
        assert [s for s, k in fake.actor_calls if k == 0] == ["a", "c"]
    else:
        for sid in "abc":
            err = results[sid]["error"]
            assert err["type"] == "ActorDied" and "creation task" in err["message"]
    assert fake.probes == [] and set(eng._dead) == {0} and fake.now < 5.0


def test_an_actor_ray_says_is_restarting_is_waited_for(monkeypatch):
    """A probe can fail with ``ActorDiedError`` while Ray restarts the actor (it died again
    during its restart): the actor table says RESTARTING, so it is asked again, not given up."""
    eng, fake = dying_engine(monkeypatch, {("device", "a"): [NodeDiedError("node"), DONE],
                                           ("device", "b"): [DONE]}, actors=1,
                             states={0: ["RESTARTING", "RESTARTING"]})
    eng.submit(task("a"))
    eng.submit(task("b"))
    results = {r["slide_id"]: r for r in drain(eng, timeout=0.5)}
    assert results["a"]["status"] == results["b"]["status"] == "done"
    assert fake.table == [0, 0] and len(fake.probes) == 3 and not eng._dead


class TakeRef:
    """A ``take()`` call of the engine's clock actor."""


class StartingRay(SlowFakeRay):
    """CPU tasks whose Ray worker takes ``startup[slide]`` seconds to start (``inf``: never)
    and then runs ``run_s[slide]`` seconds (``None``: hangs); each ``wait`` moves the clock
    ``step`` seconds. A task tells the clock actor (:class:`_StartClock`) when it starts."""

    def __init__(self, script, *, startup, run_s, step=0.1):
        super().__init__(script)
        self.now, self.step, self.startup, self.run_s = 0.0, step, startup, run_s
        self.cpu_refs, self.told, self.taken = [], [], []
        self.clock = type("C", (), {"take": type("T", (), {
            "remote": staticmethod(TakeRef)})()})()

    def cpu(self, task, *args):
        clock, key = args[-2:] if len(args) > 4 else (None, None)  # None: no clock actor
        assert clock in (self.clock, None)
        ref = self._call("cpu", task)
        sid = task["slide"]["slide_id"]
        ref.start_at, ref.key, ref.run = self.now + self.startup[sid], key, self.run_s[sid]
        self.cpu_refs.append(ref)
        return ref

    def wait(self, refs, num_returns, timeout):
        self.now += self.step
        for ref in self.cpu_refs:
            if (ref.key is not None and self.now >= ref.start_at
                    and ref.key not in self.taken + self.told):
                self.told.append(ref.key)
        ready = []
        for ref in refs:
            if ref in self.cpu_refs:
                if ref.run is None or self.now < ref.start_at + ref.run:
                    continue
                self.cpu_refs.remove(ref)
            ready.append(ref)
        return ready, []

    def get(self, ref):
        if isinstance(ref, TakeRef):
            keys, self.told = self.told, []
            self.taken += keys
            return keys
        return super().get(ref)

    def cancel(self, ref, force):
        super().cancel(ref, force)
        self.cpu_refs.remove(ref)


def starting_engine(monkeypatch, fake):
    """An engine running CPU steps only on ``fake`` (a :class:`StartingRay`), its clock
    actor ``fake.clock``, a 1-s slide limit, on ``fake``'s clock."""
    eng, _ = make_engine(monkeypatch, {})
    monkeypatch.setattr(eng, "ray", fake)
    monkeypatch.setattr(ray_engine.time, "monotonic", lambda: fake.now)
    eng._remote_cpu = type("R", (), {"remote": lambda _s, task, *a: fake.cpu(task, *a)})()
    eng._clock = fake.clock
    eng.cpu_steps, eng.device_steps = ["segment", "patch"], []
    eng.slide_timeout = 1.0
    return eng


def test_a_cpu_task_is_timed_from_when_it_starts_running(monkeypatch):
    """Before, a CPU part's clock ran from its submission, so a Ray worker that took 3 s to
    start (imports, a cold node) failed a 1-s slide limit it never reached. Now: ``a`` (3 s
    start-up, 0.5 s run) is done; ``b`` (hangs once started at 0.2 s) is stopped 1 s after
    it started; ``c``, whose worker never starts, fails after the start-up limit, saying so."""
    monkeypatch.setattr(ray_engine, "STARTUP_LIMIT", 5.0)
    fake = StartingRay({("cpu", s): [DONE] for s in "abc"},
                       startup={"a": 3.0, "b": 0.2, "c": float("inf")},
                       run_s={"a": 0.5, "b": None, "c": 0.1})
    eng = starting_engine(monkeypatch, fake)
    for sid in "abc":
        eng.submit(task(sid))
    ended = {}
    while eng.in_flight():
        for r in eng.wait(timeout=0.5):
            ended[r["slide_id"]] = (r, fake.now)
    (a, _), (b, b_at), (c, c_at) = ended["a"], ended["b"], ended["c"]
    assert a["status"] == "done", a
    assert b["error"]["type"] == "Timeout" and "per-slide limit of 1 s" in b["error"]["message"]
    assert 1.2 <= b_at <= 1.4 and 1.0 <= b["seconds"] <= 1.2  # 1 s after it started
    assert c["error"]["type"] == "Timeout" and "did not start running within 5 s" in (
        c["error"]["message"])
    assert 5.0 < c_at <= 5.2
    assert sorted(s for s, _ in fake.cancelled) == ["b", "c"]
    assert not eng._refs and not eng._began and not eng._submitted and not eng._keys


def test_cpu_tasks_are_timed_from_now_when_the_clock_actor_is_lost(monkeypatch):
    """The clock actor's node died at 0.5 s (its ``take`` fails from then): ``a``, whose
    start was never told, is timed from then; ``b``, submitted later, from its submission;
    so the limit still holds for both."""
    fake = StartingRay({("cpu", s): [DONE] for s in "ab"},
                       startup={"a": float("inf"), "b": 0.0}, run_s={"a": None, "b": None})
    real_get = fake.get

    def get(ref):
        if isinstance(ref, TakeRef) and fake.now >= 0.5:
            raise ActorDiedError("The actor died unexpectedly before finishing this task.")
        return real_get(ref)

    monkeypatch.setattr(fake, "get", get)
    eng = starting_engine(monkeypatch, fake)
    eng.submit(task("a"))
    ends = {}
    for _ in range(40):
        if fake.now >= 0.95 and "b" not in fake.calls[-1]:
            eng.submit(task("b"))  # after the clock's loss: timed from its submission
        ends.update({r["slide_id"]: (r, fake.now) for r in eng.wait(timeout=0.5)})
        if len(ends) == 2:
            break
    assert eng._clock is None
    (a, a_at), (b, b_at) = ends["a"], ends["b"]
    assert a["error"]["type"] == b["error"]["type"] == "Timeout"
    assert 1.5 < a_at <= 1.7 and 2.0 < b_at <= 2.2
