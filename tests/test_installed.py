"""Installed versions read from ``.dist-info`` names agree with ``importlib.metadata``'s."""

from __future__ import annotations

import importlib.metadata

import pytest

from offload_fixer import installed


@pytest.mark.parametrize("distribution", ["jax", "jaxlib", "libcst", "click"])
def test_the_installed_versions_are_the_ones_package_metadata_gives(distribution):
    assert installed.version(distribution) == importlib.metadata.version(distribution)


def test_a_distribution_not_installed_has_no_version():
    assert installed.version("offload-fixer-no-such-distribution") is None


@pytest.mark.parametrize(
    "entries, expected",
    [
        ({"jax-9.1.0.dist-info": "9.1.0"}, "9.1.0"),
        ({"jax-9.1.0.dist-info": "9.1.0", "jax_cuda12_plugin-9.1.0.dist-info": "9.1.0"}, "9.1.0"),
        ({"jax.egg-info": "9.2.0"}, "9.2.0"),  # no dist-info: importlib.metadata reads it
        ({"jax-9.3.0.dist-info": "9.3.0", "jax-9.4.0.dist-info": "9.4.0"}, None),  # two: as importlib.metadata picks
    ],
)
def test_the_first_metadata_on_sys_path_gives_the_version(tmp_path, monkeypatch, entries, expected):
    for entry, version in entries.items():
        name = entry.partition("-")[0].partition(".")[0]
        (tmp_path / entry).mkdir()
        (tmp_path / entry / ("PKG-INFO" if entry.endswith("egg-info") else "METADATA")).write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    found = installed.version("jax")
    assert found == importlib.metadata.version("jax")
    assert expected is None or found == expected
