"""MkDocs hook: the reference pages are generated from the code at build time
(:mod:`rbench.reference_pages`), and so is the architecture page's layer table
(:mod:`rbench.layers`), so no hand-written copy can drift from the settings classes or the layers."""

from __future__ import annotations

from mkdocs.structure.files import File

GENERATED = {
    "reference/configuration.md": "configuration_reference",
    "reference/cli.md": "cli_reference",
}


def on_page_markdown(markdown, page, config, files):
    """The architecture page's layer table, from the list the layer test checks (:mod:`rbench.layers`), and
    the datasets page's mirror layout, from the adapters' own file lists (:mod:`rbench.dataset_listing`)."""
    if page.file.src_uri == "architecture.md":
        from rbench.layers import layer_table

        return markdown.replace(LAYER_TABLE, layer_table())
    if page.file.src_uri == "datasets.md":
        from rbench.dataset_listing import mirror_layout_table

        return markdown.replace(MIRROR_LAYOUT, mirror_layout_table())
    return markdown


LAYER_TABLE = "<!-- the layer table: rbench.layers.layer_table() -->"
MIRROR_LAYOUT = "<!-- the mirror layout: rbench.dataset_listing.mirror_layout_table() -->"


def on_files(files, config):
    """Add the generated reference pages to the site's files."""
    from rbench import reference_pages

    for path, function in GENERATED.items():
        files.append(File.generated(config, path, content=getattr(reference_pages, function)()))
    return files
