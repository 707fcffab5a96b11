"""MkDocs hook: the reference pages are generated from the code at build time
(:mod:`rbench.reference_pages`), so no hand-written copy can drift from the settings classes."""

from __future__ import annotations

from mkdocs.structure.files import File

GENERATED = {
    "reference/configuration.md": "configuration_reference",
    "reference/cli.md": "cli_reference",
}


def on_files(files, config):
    """Add the generated reference pages to the site's files."""
    from rbench import reference_pages

    for path, function in GENERATED.items():
        files.append(File.generated(config, path, content=getattr(reference_pages, function)()))
    return files
