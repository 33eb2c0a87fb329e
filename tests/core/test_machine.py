"""The CPU description the bench reports carry (mathsearch.core.machine), from cpuinfo files."""

from __future__ import annotations

import json
from pathlib import Path

from mathsearch.core.machine import UNIT_FLAGS, cpu_flags, describe_cpu

ZEN4 = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
    "model name\t: AMD EPYC   Processor\nflags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_vnni"
    " avx512_bf16\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
    "model\t\t: 17\nmodel name\t: AMD EPYC   Processor\nflags\t\t: fpu sse2 avx2 fma avx512f\n"
)
ZEN1 = (
    "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
    "flags\t\t: fpu avx f16c avx2 fma\n"
)
SAPPHIRE = (
    "model name\t: Intel(R) Xeon(R) Platinum 8480C\n"
    "flags\t\t: avx2 fma avx512f avx512_vnni avx512_bf16 amx_bf16 amx_int8 amx_tile\n"
)
GRAVITON = (
    "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd asimddp sve i8mm bf16\n"
    "CPU implementer\t: 0x41\n"
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_zen4_names_its_avx512_bf16_and_vnni_units(tmp_path: Path) -> None:
    cpu = describe_cpu(_write(tmp_path, ZEN4))
    assert (cpu.name, cpu.vendor, cpu.family, cpu.model) == (
        "AMD EPYC Processor",
        "AuthenticAMD",
        25,
        17,
    )
    assert cpu.units == ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16")
    assert cpu.bf16_units is True and cpu.int8_dot is True
    line = cpu.summary()
    assert line.startswith("AMD EPYC Processor (family 25 model 17), ") and line.endswith(
        "units: avx2 fma avx512f avx512_vnni avx512_bf16"
    )
    assert f"{cpu.logical_cpus} logical CPUs" in line


def test_the_units_decide_bf16_and_int8(tmp_path: Path) -> None:
    zen1 = describe_cpu(_write(tmp_path, ZEN1))
    assert zen1.units == ("avx2", "fma") and zen1.bf16_units is False and zen1.int8_dot is False
    xeon = describe_cpu(_write(tmp_path, SAPPHIRE))
    assert "amx_bf16" in xeon.units and "amx_tile" not in xeon.units  # only UNIT_FLAGS listed
    assert xeon.bf16_units is True and xeon.int8_dot is True and xeon.family is None
    assert "(family" not in xeon.summary()
    arm = describe_cpu(_write(tmp_path, GRAVITON))  # Arm lists "Features", not "flags"
    assert arm.units == ("asimd", "asimddp", "i8mm", "bf16", "sve") and arm.bf16_units is True


def test_unreadable_or_flagless_cpuinfo_says_unknown(tmp_path: Path) -> None:
    for cpu in (
        describe_cpu(tmp_path / "missing"),
        describe_cpu(_write(tmp_path, "processor\t: 0\n")),
    ):
        assert cpu.units is None and cpu.bf16_units is None and cpu.int8_dot is None
        assert cpu.name and cpu.logical_cpus >= 1
        assert cpu.summary().endswith("units: unknown (no CPU flags readable)")
    none = describe_cpu(_write(tmp_path, "flags\t\t: fpu sse2\n"))
    assert none.units == () and none.summary().endswith(
        "units: none of " + " ".join(UNIT_FLAGS[:8])
    )


def test_flags_of_every_processor_and_a_json_report(tmp_path: Path) -> None:
    path = _write(tmp_path, ZEN4)
    assert {"avx512bw", "avx512_bf16", "fpu"} <= cpu_flags(path)  # type: ignore[operator]
    assert cpu_flags(tmp_path / "missing") is None
    out = json.loads(json.dumps(describe_cpu(path).as_dict()))
    assert out["units"][-1] == "avx512_bf16" and out["bf16_units"] is True
    assert out["summary"] == describe_cpu(path).summary()
