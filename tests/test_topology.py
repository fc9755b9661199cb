"""TPU pods by the names users write, as Cloud TPU and libtpu lay them out."""

from __future__ import annotations

import pytest

from offload_fixer.topology import UnknownTopology, parse_topology


@pytest.mark.parametrize(
    ("name", "libtpu_name", "chips"),
    [
        # Cloud TPU's accelerator types: chips on v5e and v6e, TensorCores on v4 and v5p
        ("v5e-256", "v5e:16x16", 256),
        ("v5e-128", "v5e:8x16", 128),
        ("v5e-4", "v5e:2x2", 4),
        ("v5litepod-16", "v5e:4x4", 16),
        ("v6e-256", "v6e:16x16", 256),
        ("v4-1024", "v4:8x8x8", 512),
        ("v4-8", "v4:2x2x1", 4),
        ("v4-64", "v4:2x4x4", 32),
        ("v5p-256", "v5p:4x4x8", 128),
        # libtpu's own spelling, kept as written
        ("v5e:16x16", "v5e:16x16", 256),
        ("v5p:4x4x8", "v5p:4x4x8", 128),
        ("V5E:2X4", "v5e:2x4", 8),
    ],
)
def test_a_pod_is_read_as_cloud_tpu_lays_it_out(name, libtpu_name, chips):
    topology = parse_topology(name)
    assert (topology.libtpu_name, topology.chips) == (libtpu_name, chips)
    assert str(topology) == name


def test_slices_multiply_the_chips_and_name_the_layout_they_are_cached_under():
    two = parse_topology("v5e-256", num_slices=2)
    assert two.chips == 512 and str(two) == "2 slices of v5e-256"
    assert two.key() != parse_topology("v5e-256").key() == parse_topology("v5e:16x16").key()


def test_megacore_chips_are_one_device_each():
    assert parse_topology("v4-1024").generation.chip_config == "megacore"
    assert parse_topology("v5e-256").generation.chip_config is None


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("v5e", "cannot read the topology 'v5e'"),
        ("tpu-256", "unknown TPU generation in 'tpu-256'"),
        ("v5e-384", "v5e-384 is not a power of two chips: write its layout (v5e:4x4 ...)"),
        ("v5p-384", "v5p-384 is not a power of two cores: write its layout (v5p:4x4x4 ...)"),
        ("v4-7", "not a power of two cores"),
        ("v5e:16x16x1", "a v5e slice has 2 dimensions of chips (v5e:4x4), not 'v5e:16x16x1'"),
        ("v4:8x8", "a v4 slice has 3 dimensions"),
        ("v5e:0x4", "a v5e slice has 2 dimensions"),
    ],
)
def test_a_name_it_cannot_read_says_how_to_write_one(name, said):
    with pytest.raises(UnknownTopology, match=None) as raised:
        parse_topology(name)
    assert said in str(raised.value)


def test_slices_must_be_counted_from_one():
    with pytest.raises(UnknownTopology, match="--num-slices must be 1 or more"):
        parse_topology("v5e-256", num_slices=0)
