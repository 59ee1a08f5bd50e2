"""Same seed, same ledger, whatever the thread count or CPU (``make check``): each chapter runs at smoke with 2
threads, and, on a CPU with AVX-512, again at 1 thread restricted to AVX2 instructions; its verdicts and checked
numbers must equal the committed reference's.

`make reference` computes the references at 1 thread as a CPU without AVX-512 does (AVX2 only where the CPU has
AVX-512), so on an AVX-512 CPU the 1-thread run of ``make test`` is the one that compares another instruction set
with them, and the AVX2 run here repeats their computation on this machine. On a CPU without AVX-512 that run
would repeat the 1-thread one, and is skipped."""

import re

import pytest

from chapter_runs import assert_reference_results, expected_seconds, reference_ledger, run_param, smoke_run
from paperlib.core import params as P
from paperlib.core.devices import has_avx512

pytestmark = pytest.mark.check
PAPERS = P.available_papers()


def cpu_threads(device: str) -> int:
    """The thread count in a ledger's device, "cpu (1 thread)" or "cpu (2 threads)"."""
    match = re.fullmatch(r"cpu \((\d+) threads?\)", device)
    assert match, f"not a CPU run: {device!r}"
    return int(match.group(1))


@pytest.mark.parametrize("paper", [run_param(paper, seconds=expected_seconds(paper),
                                             id=paper) for paper in PAPERS])
def test_two_threads_give_the_reference_results(paper):
    run = smoke_run(paper, threads=2)
    assert cpu_threads(run.ledger()["device"]) == 2
    assert cpu_threads(reference_ledger(paper)["device"]) == 1
    assert_reference_results(run)


@pytest.mark.skipif(not has_avx512(), reason="this CPU has no AVX-512: restricting it to AVX2 changes nothing")
@pytest.mark.parametrize("paper", [run_param(paper, seconds=expected_seconds(paper),
                                             id=paper) for paper in PAPERS])
def test_another_instruction_set_gives_the_reference_results(paper):
    run = smoke_run(paper, isa="avx2")
    assert cpu_threads(run.ledger()["device"]) == 1
    assert_reference_results(run)
