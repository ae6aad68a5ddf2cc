"""nvidia-smi's XML read into torchrig's NvmlGpu and set against an NVML snapshot: the reading the
`gpu` test of NVML against nvidia-smi (tests/gpu/test_nvml_vs_nvidia_smi.py) relies on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchrig.facts.nvml import NvmlSnapshot, read_snapshot

from ..gpu import nvidia_smi as smi
from .facts.fake_nvml import FakeNvml, board

H100_XML = (Path(__file__).parents[1] / "gpu" / "data" / "nvidia-smi-h100.xml").read_text()

# An older driver's names (clocks_throttle_reasons, single/double bit ECC totals) on a GPU in
# trouble: hardware slowdown, two uncorrected errors, a narrow link, pages pending retirement.
OLD_DRIVER_XML = """<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>470.82.01</driver_version>
  <cuda_version>11.4</cuda_version>
  <gpu id="00000000:3B:00.0">
    <product_name>Tesla V100-SXM2-32GB</product_name>
    <persistence_mode>Disabled</persistence_mode>
    <mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
    <uuid>GPU-0000</uuid>
    <pci>
      <pci_bus_id>00000000:3B:00.0</pci_bus_id>
      <pci_gpu_link_info>
        <pcie_gen><max_link_gen>3</max_link_gen><current_link_gen>3</current_link_gen></pcie_gen>
        <link_widths>
          <max_link_width>16x</max_link_width><current_link_width>8x</current_link_width>
        </link_widths>
      </pci_gpu_link_info>
    </pci>
    <clocks_throttle_reasons>
      <clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle>
      <clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown>
    </clocks_throttle_reasons>
    <fb_memory_usage><total>32510 MiB</total></fb_memory_usage>
    <compute_mode>Exclusive_Process</compute_mode>
    <ecc_errors>
      <volatile>
        <single_bit><device_memory>5</device_memory><total>5</total></single_bit>
        <double_bit><device_memory>2</device_memory><total>2</total></double_bit>
      </volatile>
    </ecc_errors>
    <retired_pages><pending_retirement>Yes</pending_retirement></retired_pages>
    <remapped_rows>N/A</remapped_rows>
    <temperature>
      <gpu_temp>70 C</gpu_temp><gpu_temp_slow_threshold>N/A</gpu_temp_slow_threshold>
    </temperature>
  </gpu>
</nvidia_smi_log>
"""


def test_a_current_driver_xml_reads_into_nvml_fields() -> None:
    reading = smi.parse_smi_xml(H100_XML)
    assert (reading.driver_version, reading.cuda_version) == ("580.65.06", "13.0")
    [gpu] = reading.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.pci_bus_id == "00000000:18:00.0"
    assert gpu.memory_total_bytes == 81559 * 1024**2
    assert (gpu.persistence_mode, gpu.compute_mode, gpu.mig_mode) == (True, 0, (0, 0))
    assert gpu.ecc_volatile_uncorrected == 0
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failed) == (False, False)
    assert gpu.retired_pages_pending is None  # N/A on Hopper: rows are remapped instead
    assert (gpu.temperature_c, gpu.slowdown_temperature_c) == (31, 89)
    assert gpu.clock_event_reasons == 0x1  # idle
    assert (gpu.pcie_gen, gpu.pcie_width) == ((5, 5), (16, 16))


def test_an_older_driver_xml_reads_the_same_fields_under_their_old_names() -> None:
    [gpu] = smi.parse_smi_xml(OLD_DRIVER_XML).gpus
    assert gpu.clock_event_reasons == 0x8  # hardware slowdown, not idle
    assert gpu.ecc_volatile_uncorrected == 2  # double-bit total, not the single-bit one
    assert gpu.mig_mode is None
    assert gpu.compute_mode == 3
    assert gpu.persistence_mode is False
    assert gpu.retired_pages_pending is True
    assert gpu.remapped_rows_pending is None
    assert (gpu.pcie_gen, gpu.pcie_width) == ((3, 3), (8, 16))
    assert (gpu.temperature_c, gpu.slowdown_temperature_c) == (70, None)


def snapshot_like(xml: str, **changes: object) -> NvmlSnapshot:
    """What a real NVML would say about the same GPU, with `changes` applied."""
    [gpu] = smi.parse_smi_xml(xml).gpus
    return NvmlSnapshot(driver_version="580.65.06", gpus=[dataclasses.replace(gpu, **changes)])


def test_agreeing_readings_match_on_every_aspect() -> None:
    rows, unpaired = smi.compare(snapshot_like(H100_XML), smi.parse_smi_xml(H100_XML))
    assert unpaired == []
    assert [row.check for row in rows] == [aspect.check for aspect in smi.ASPECTS]
    assert all(row.match for row in rows)
    assert all(row.nvml_verdicts == ["PASS"] for row in rows)


def test_the_troubled_gpu_gets_the_same_verdicts_from_both() -> None:
    rows, _ = smi.compare(snapshot_like(OLD_DRIVER_XML), smi.parse_smi_xml(OLD_DRIVER_XML))
    verdicts = {row.check: row.smi_verdicts for row in rows}
    assert verdicts["ECC and memory repair"] == ["FAIL", "WARN"]
    assert verdicts["clock event reasons"] == ["FAIL"]
    assert verdicts["PCIe link (gen, width)"] == ["WARN"]
    assert all(row.match for row in rows)


def test_a_disagreement_is_named_with_both_facts_and_verdicts() -> None:
    rows, _ = smi.compare(
        snapshot_like(H100_XML, ecc_volatile_uncorrected=1), smi.parse_smi_xml(H100_XML)
    )
    [different] = [row for row in rows if not row.match]
    assert different.check == "ECC and memory repair"
    assert "ecc_volatile_uncorrected=1" in different.nvml
    assert "ecc_volatile_uncorrected=0" in different.smi
    assert (different.nvml_verdicts, different.smi_verdicts) == (["FAIL"], ["PASS"])


def test_reason_bits_newer_than_nvidia_smi_knows_are_not_a_disagreement() -> None:
    rows, _ = smi.compare(
        snapshot_like(H100_XML, clock_event_reasons=0x1 | 0x1000), smi.parse_smi_xml(H100_XML)
    )
    assert all(row.match for row in rows)


def test_temperatures_a_degree_or_two_apart_agree_but_not_ten() -> None:
    reading = smi.parse_smi_xml(H100_XML)
    close, _ = smi.compare(snapshot_like(H100_XML, temperature_c=33), reading)
    far, _ = smi.compare(snapshot_like(H100_XML, temperature_c=41), reading)
    assert all(row.match for row in close)
    assert [row.check for row in far if not row.match] == ["temperature"]


def test_gpus_are_paired_by_bus_id_and_the_unpaired_are_listed() -> None:
    nvml = snapshot_like(H100_XML, pci_bus_id="00000000:19:00.0")
    rows, unpaired = smi.compare(nvml, smi.parse_smi_xml(H100_XML))
    assert rows == []
    assert unpaired == [
        "GPU0 00000000:19:00.0: in NVML, not in nvidia-smi",
        "0000:18:00.0: in nvidia-smi, not in NVML",
    ]


def test_bus_ids_compare_without_case_or_domain_width() -> None:
    assert smi.bus_key("00000000:1b:00.0") == smi.bus_key("0000:1B:00.0")


def ecc_xml(volatile: str) -> str:
    return (
        '<nvidia_smi_log><gpu id="0:1"><ecc_errors><volatile>'
        f"{volatile}</volatile></ecc_errors></gpu></nvidia_smi_log>"
    )


def test_uncorrected_ecc_sums_sram_and_dram_without_counting_a_total_twice() -> None:
    split = ecc_xml(
        "<sram_correctable>9</sram_correctable><sram_uncorrectable_parity>1"
        "</sram_uncorrectable_parity><sram_uncorrectable_secded>2</sram_uncorrectable_secded>"
        "<dram_correctable>9</dram_correctable><dram_uncorrectable>4</dram_uncorrectable>"
    )
    assert smi.parse_smi_xml(split).gpus[0].ecc_volatile_uncorrected == 7
    total = ecc_xml(
        "<sram_uncorrectable>3</sram_uncorrectable><sram_uncorrectable_parity>1"
        "</sram_uncorrectable_parity><sram_uncorrectable_secded>2</sram_uncorrectable_secded>"
        "<dram_uncorrectable>0</dram_uncorrectable>"
    )
    assert smi.parse_smi_xml(total).gpus[0].ecc_volatile_uncorrected == 3
    ecc_off = ecc_xml("<sram_uncorrectable>N/A</sram_uncorrectable>")
    assert smi.parse_smi_xml(ecc_off).gpus[0].ecc_volatile_uncorrected is None


# The first H100 run's `nvidia-smi -q` (driver 580.159.04): temperatures as margins to T.Limit,
# no absolute thresholds. The slowdown point is 38 + 49 - (-2) = 89 C, what NVML said.
DRIVER_580_TEMPERATURE_TEXT = """\
    GPU Current Temp                  : 38 C
    GPU T.Limit Temp                  : 49 C
    GPU Shutdown T.Limit Temp         : -8 C
    GPU Slowdown T.Limit Temp         : -2 C
    GPU Max Operating T.Limit Temp    : 0 C
"""
# nvidia-smi's XML element for each of those lines (`nvidia-smi -q -x` on the same driver).
XML_ELEMENTS = {
    "GPU Current Temp": "gpu_temp",
    "GPU T.Limit Temp": "gpu_temp_tlimit",
    "GPU Shutdown T.Limit Temp": "gpu_temp_max_tlimit_threshold",
    "GPU Slowdown T.Limit Temp": "gpu_temp_slow_tlimit_threshold",
    "GPU Max Operating T.Limit Temp": "gpu_temp_max_gpu_tlimit_threshold",
}


def with_temperature_block(xml: str, text: str) -> str:
    """`xml` with its <temperature> block replaced by the lines of `nvidia-smi -q` text."""
    pairs = [line.split(":", 1) for line in text.strip().splitlines()]
    block = "".join(
        f"<{XML_ELEMENTS[label.strip()]}>{value.strip()}</{XML_ELEMENTS[label.strip()]}>"
        for label, value in pairs
    )
    start, end = xml.index("<temperature>"), xml.index("</temperature>")
    return xml[:start] + f"<temperature>{block}" + xml[end:]


def test_the_driver_580_margin_form_gives_the_slowdown_point_nvml_gives() -> None:
    xml = with_temperature_block(H100_XML, DRIVER_580_TEMPERATURE_TEXT)
    [gpu] = smi.parse_smi_xml(xml).gpus
    assert (gpu.temperature_c, gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (38, 51, 89)
    # NVML on the same card: 38 C, a margin of 49 C to T.Limit, slowdown 2 C past T.Limit.
    nvml = read_snapshot(
        FakeNvml(board(1, pci_bus_id=gpu.pci_bus_id, temperature=38, tlimit_temperature=87,
                       slowdown_tlimit=-2))
    )  # fmt: skip
    assert nvml.gpus[0].slowdown_temperature_c == 89
    rows, _ = smi.compare(nvml, smi.parse_smi_xml(xml))
    [temperature] = [row for row in rows if row.check == "temperature"]
    assert temperature.match and temperature.nvml_verdicts == ["PASS"]


def test_the_absolute_form_still_reads_and_a_margin_without_its_offset_errs_early() -> None:
    # Absolute thresholds beside a T.Limit margin (driver 580.65.06): the threshold stands.
    [gpu] = smi.parse_smi_xml(H100_XML).gpus
    assert (gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (58, 89)
    # A T.Limit margin alone counts to the maximum operating point, short of slowdown.
    only_margin = "".join(
        line for line in DRIVER_580_TEMPERATURE_TEXT.splitlines(True) if "Slowdown" not in line
    )
    [gpu] = smi.parse_smi_xml(with_temperature_block(H100_XML, only_margin)).gpus
    assert (gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (49, 87)
