from __future__ import annotations

import subprocess
import sys

from mathsearch.runtime import providers


def test_cpu_is_always_last_and_cuda_only_when_it_really_loads(monkeypatch) -> None:
    providers.cuda_usable.cache_clear()
    monkeypatch.setattr(providers, "_driver_loads", lambda: False)
    assert providers.select_providers() == [providers.CPU]
    assert providers.select_providers(prefer_gpu=False) == [providers.CPU]
    providers.cuda_usable.cache_clear()


def test_probe_on_this_machine_prints_nothing() -> None:
    """On a CPU machine no CUDA error spam reaches stderr; on a GPU one CUDA comes first."""
    code = (
        "from mathsearch.runtime import select_providers, cuda_usable;"
        "p = select_providers(); print(','.join(p)); print(cuda_usable())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    chosen, usable = result.stdout.split()
    assert chosen.split(",")[-1] == "CPUExecutionProvider"
    assert (chosen.split(",")[0] == "CUDAExecutionProvider") == (usable == "True")
    assert result.stderr == ""


def test_inference_path_never_imports_torch() -> None:
    code = (
        "import sys, mathsearch, mathsearch.indexer, mathsearch.cli.main, mathsearch.export,"
        " mathsearch.runtime, mathsearch.runtime.bitmap_runtime, mathsearch.runtime.figure_runtime,"
        " mathsearch.runtime.seq2seq_runtime,"
        " mathsearch.opensearch, mathsearch.stack, mathsearch.workers,"
        " mathsearch.workers.app, mathsearch.workers.tasks, mathsearch.stack.demo;"
        "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
