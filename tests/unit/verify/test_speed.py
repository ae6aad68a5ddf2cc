"""verify's timing method (torchrig.verify.speed): warm clocks, the best of runs long enough,
and the matmul as training code calls it."""

from __future__ import annotations

from typing import Any

import pytest
from torchrig.verify import speed

FAST = speed.Timing(min_seconds=0.002, repeats=2, warmup_batch_s=0.001, warmup_max_s=0.005)


def cpu_as_cuda() -> Any:
    pytest.importorskip("torch")
    from .cpu_as_cuda import CpuAsCuda

    return CpuAsCuda()


class RampingClock:
    """A measured call whose cost falls while the clocks ramp up (the first `ramp_calls` calls
    cost `cold` seconds, the rest `warm`), with an optional one-off interruption; time is
    virtual, so the test runs in no time at all."""

    def __init__(self, cold: float, warm: float, ramp_calls: int, hiccup_on: int = -1) -> None:
        self.cold, self.warm, self.ramp_calls, self.hiccup_on = cold, warm, ramp_calls, hiccup_on
        self.calls = 0
        self.batches: list[tuple[int, float]] = []  # (iterations, seconds) of each measurement

    def __call__(self, iterations: int) -> float:
        seconds = 0.0
        for _ in range(iterations):
            seconds += self.cold if self.calls < self.ramp_calls else self.warm
            self.calls += 1
        if len(self.batches) == self.hiccup_on:
            seconds *= 1.5  # another process took the GPU for a moment
        self.batches.append((iterations, seconds))
        return seconds


def test_figures_are_timed_on_warm_clocks_for_half_a_second_at_least_best_of_repeats() -> None:
    timing = speed.GPU_TIMING
    assert timing.min_seconds >= 0.5 and timing.repeats >= 3
    # 1.4 ms a call (an 8192 bf16 matmul on an H100) once warm; 2 ms for the first 300 calls.
    clock = RampingClock(cold=2e-3, warm=1.4e-3, ramp_calls=300)
    assert speed.seconds_per_call(clock, timing) == pytest.approx(1.4e-3)
    timed = clock.batches[-timing.repeats :]
    assert all(seconds >= timing.min_seconds for _, seconds in timed)
    # The timed runs began only after the ramp.
    assert sum(iterations for iterations, _ in clock.batches[: -timing.repeats]) >= 300


def test_an_interrupted_repeat_does_not_lower_the_figure() -> None:
    timing = speed.GPU_TIMING
    clock = RampingClock(cold=1e-3, warm=1e-3, ramp_calls=0)
    speed.seconds_per_call(clock, timing)
    hiccup_on = len(clock.batches) - timing.repeats  # the first timed run
    clock = RampingClock(cold=1e-3, warm=1e-3, ramp_calls=0, hiccup_on=hiccup_on)
    assert speed.seconds_per_call(clock, timing) == pytest.approx(1e-3)


def test_warming_up_stops_at_its_budget_on_clocks_that_never_settle() -> None:
    timing = speed.GPU_TIMING
    calls = 0

    def wandering(iterations: int) -> float:
        nonlocal calls
        calls += iterations
        return iterations * (1e-3 if (calls // 100) % 2 else 2e-3)

    total = 0.0

    def counted(iterations: int) -> float:
        nonlocal total
        seconds = wandering(iterations)
        total += seconds
        return seconds

    speed.seconds_per_call(counted, timing)
    most = timing.warmup_max_s + timing.warmup_batch_s + 2 * timing.repeats * timing.min_seconds
    assert total <= most


def test_the_matmul_writes_no_out_tensor() -> None:
    """`out=` cost verify 5 % against a plain `a @ b` loop on an H100."""
    torch = pytest.importorskip("torch")
    seen: list[dict[str, Any]] = []
    fake = cpu_as_cuda()

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return torch.matmul(*args, **kwargs)

    fake.matmul = spy  # type: ignore[attr-defined]
    speed.matmul_tflops(fake, "cuda:0", "bf16", 16, FAST)
    assert seen and all("out" not in kwargs for kwargs in seen)
