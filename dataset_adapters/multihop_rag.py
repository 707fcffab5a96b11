"""MultiHop-RAG (yixuantt/MultiHop-RAG: ``dataset/corpus.json``, ``dataset/MultiHopRAG.json``, pinned by
their Git LFS digests) as the ARM reproduction's scripts turn it into a corpus and a benchmark
(apostolhskouk/ARM at 5a6cb92, ``scripts/MultiiHopRag/``):

- ``chunking.py``: each article with a body (lines 30-33) is cleaned by chonky's ``MarkupRemover``
  (line 35) and cut by its ``ParagraphSplitter`` with ``mirth/chonky_modernbert_base_1`` (lines 13-16,
  37); each chunk is the object ``title [SEP] chunk`` (line 41), its ``page_title`` the article's
  ``source`` and its ``source`` ``sentence_<title>`` (lines 44-49), so its document id is
  ``<source>_sentence_<title>``;
- ``generate_benchmark_all.py``: every query, a gold document per evidence item,
  ``<source>_sentence_<title>`` with the title's spaces and dots made ``_`` (lines 16-22).

The two scripts do not agree on the title (``chunking.py`` keeps it as it is), so at ARM's HEAD almost
no gold document is in its corpus; the report's BM25 recall (Table 6: R@5 0.749) says the release's ids
agreed. ``ids: agree`` (default) keeps the title as ``chunking.py`` does on both sides; ``ids: arm_head``
writes the gold ids as ``generate_benchmark_all.py`` does. ARM ran the splitter on a GPU
(``device="cuda:1"``) with chonky 0.1.6 (``environment.yml``); here it runs on the CPU, where a
boundary token's score can round the other way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict

from rbench.core.errors import MissingExtraError
from rbench.dataset_adapters.base import ADAPTERS, Adapter, CorpusObject, FileSpec, Query, read_json_list
from rbench.dataset_adapters.chunking import chonky_splitter

COMMIT = "3dd4d4e79fc9843008b8f832da99086a82f1a805"
FILES = {"corpus": ("multihop_rag/corpus.json", "20b61b5ab84de84a927420c5d265b7ec8d859ae49980699958a787ade9e4d28f"),
         "queries": ("multihop_rag/MultiHopRAG.json",
                     "03cfb4926461f868684903aadc8024447bdda5bb3f6804741424cce338515bff")}
WHAT = "a MultiHop-RAG file (dataset/)"


class MultiHopRagParams(BaseModel):
    """``model``: the chonky model that cuts the articles (a hub id or a local folder; ARM's by
    default); ``ids``: ``agree`` (default) or ``arm_head``, how the gold ids spell a title (the
    module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "mirth/chonky_modernbert_base_1"
    ids: Literal["agree", "arm_head"] = "agree"


def _markup_remover():
    try:
        from chonky.markup_remover import MarkupRemover
    except ImportError:
        raise MissingExtraError("magika", "markup", "MultiHop-RAG's markup removal (chonky's MarkupRemover)") from None
    return MarkupRemover()


@ADAPTERS.register
class MultiHopRag(Adapter):
    """MultiHop-RAG's news articles cut by chonky, and its multi-hop queries, as ARM builds them."""

    name = "multihop_rag"
    description = "MultiHop-RAG (yixuantt/MultiHop-RAG, pinned) cut by chonky as the ARM reproduction does"
    Params = MultiHopRagParams

    def files(self, params: MultiHopRagParams) -> list[FileSpec]:
        base = f"https://media.githubusercontent.com/media/yixuantt/MultiHop-RAG/{COMMIT}/dataset"
        return [FileSpec(name=name, sha256=digest, url=f"{base}/{Path(name).name}") for name, digest in FILES.values()]

    def models(self, params: MultiHopRagParams) -> list[str]:
        return [params.model]

    def objects(self, raw: Path, params: MultiHopRagParams) -> Iterator[CorpusObject]:
        remover, splitter = _markup_remover(), chonky_splitter(params.model)
        positions: dict[str, int] = {}
        for article in read_json_list(raw / FILES["corpus"][0], WHAT):
            body = article.get("body", "")
            if not body:
                continue
            title, source = article.get("title", ""), article.get("source", "")
            doc = f"{source}_sentence_{title}"
            for chunk in splitter(remover(body)):
                positions[doc] = positions.get(doc, -1) + 1
                yield CorpusObject(text=f"{title} [SEP] {chunk}", doc_id=doc, page_title=str(source),
                                   source=f"sentence_{title}", modality="text", position=positions[doc])

    def queries(self, raw: Path, params: MultiHopRagParams) -> Iterator[Query]:
        for i, entry in enumerate(read_json_list(raw / FILES["queries"][0], WHAT)):
            gold = []
            for evidence in entry.get("evidence_list", []):
                title = evidence.get("title", "")
                if params.ids == "arm_head":
                    title = title.replace(" ", "_").replace(".", "_")
                gold.append(f"{evidence.get('source', '')}_sentence_{title}")
            yield Query(query_id=str(i), text=str(entry.get("query", "")), gold_doc_ids=gold)
