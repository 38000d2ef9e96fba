import json
import time

import psutil
import pytest

from runner.common.budget import parse_size
from runner.machine.hardware import (
    NO_CPU_BF16, GiB, Gpu, Hardware, available_cpus, available_memory, cgroup_cpu_quota, cgroup_memory_limit,
    cpu_runs_bf16, probe_hardware)

# the flags lines of /proc/cpuinfo on an AVX2-only AMD EPYC (KVM guest) and an Intel Sapphire Rapids, and the
# Features line of an Arm Neoverse V1
EPYC_AVX2 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 sse sse2 ssse3 "
             "fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm sse4a bmi1 avx2 "
             "smep bmi2 rdseed adx clflushopt sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr arat umip vaes "
             "vpclmulqdq rdpid\n")
SAPPHIRE_RAPIDS = ("flags\t\t: fpu vme avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni "
                   "amx_bf16 amx_tile amx_int8 avx512_fp16\n")
NEOVERSE_V1 = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve bf16 i8mm\n"


def test_cgroup_v2_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert cgroup_cpu_quota(tmp_path) == 2.5


def test_cgroup_v2_unlimited(tmp_path):
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("50000")
    assert cgroup_cpu_quota(tmp_path) == 2.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    assert cgroup_cpu_quota(tmp_path) is None


def test_quota_caps_the_affinity_count(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert available_cpus(tmp_path) == 1


def test_a_containers_memory_limit_bounds_what_the_run_plans_for(tmp_path):
    """psutil reports the host's memory inside a container; the cgroup's limit (v2, else v1; a v1 'no limit' is a
    huge number) and what the run was told (`--memory`) bound it."""
    assert cgroup_memory_limit(tmp_path) is None and available_memory(cgroup_root=tmp_path) == \
        psutil.virtual_memory().total
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{3 * GiB}\n")
    assert cgroup_memory_limit(tmp_path) == 3 * GiB
    (tmp_path / "memory.max").write_text("max\n")  # v2 first: unlimited there
    assert cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory.max").write_text(f"{2 * GiB}\n")
    assert available_memory(cgroup_root=tmp_path) == 2 * GiB and available_memory(GiB, tmp_path) == GiB
    assert probe_hardware(tmp_path, busy_seconds=0, memory=GiB // 2).ram_bytes == GiB // 2


def test_sizes_are_read_in_binary_units_and_nonsense_is_refused():
    assert parse_size("8G") == parse_size("8GiB") == 8 * GiB and parse_size("512m") == 512 * 2**20
    assert parse_size("1.5G") == int(1.5 * GiB) and parse_size("4096") == 4096
    for bad in ("", "G", "-1G", "0", "8Q", "lots"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)


def test_hardware_round_trips_through_json():
    hardware = Hardware((Gpu("NVIDIA A100-SXM4-40GB", 40 * GiB, 39 * GiB, (8, 0)),), 30, 200 * GiB, 8 * GiB,
                        500 * GiB)
    assert Hardware.from_json(json.loads(json.dumps(hardware.to_json()))) == hardware
    assert hardware.gpus[0].bf16


def test_probe_on_this_machine_sees_cpus_and_memory(tmp_path):
    hardware = probe_hardware(tmp_path)
    assert hardware.cpus >= 1 and hardware.ram_bytes > GiB and hardware.disk_free_bytes > 0


def test_bf16_on_the_cpu_is_native_only_with_its_flags():
    assert not cpu_runs_bf16(EPYC_AVX2) and not cpu_runs_bf16(EPYC_AVX2 + EPYC_AVX2.replace("processor\t: 0",
                                                                                             "processor\t: 1"))
    assert cpu_runs_bf16(SAPPHIRE_RAPIDS) and cpu_runs_bf16(NEOVERSE_V1)
    assert cpu_runs_bf16("")  # nothing listed: bf16 is timed, and kept only where it is faster


def test_the_probe_says_when_this_cpu_emulates_bf16(tmp_path):
    hardware = probe_hardware(tmp_path, busy_seconds=0)
    assert hardware.cpu_bf16 == cpu_runs_bf16(open("/proc/cpuinfo").read())
    assert (NO_CPU_BF16 in hardware.notes) == (not hardware.cpu_bf16 and not hardware.gpus)


def test_a_core_kept_busy_by_another_process_is_left_out(tmp_path):
    """A fold with more threads than free cores stalls at its OpenMP barriers, so the probe plans without a core
    that another process keeps busy."""
    import os
    import signal
    import subprocess
    import sys

    allowed = available_cpus()
    # another process's, not a child of this one (the probe does not count its own tree's work as busy)
    rival = int(subprocess.check_output(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null & echo $!"]))
    try:
        time.sleep(0.3)  # the rival is running, not starting
        hardware = probe_hardware(tmp_path)
    finally:
        os.kill(rival, signal.SIGKILL)
    assert hardware.busy_cpus >= min(1, allowed - 1)
    assert hardware.cpus + hardware.busy_cpus == allowed and hardware.cpus >= 1
    assert Hardware.from_json(json.loads(json.dumps(hardware.to_json()))) == hardware


def test_busy_cores_are_not_counted_without_a_probe_interval(tmp_path):
    hardware = probe_hardware(tmp_path, busy_seconds=0)
    assert hardware.busy_cpus == 0 and hardware.cpus == available_cpus()
