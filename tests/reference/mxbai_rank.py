"""The reference side of the mxbai-rerank-v2 check: ``mxbai_rerank.MxbaiRerankV2.rank`` (mxbai-rerank
0.1.6, the authors' package) as ARM calls it (``src/retrieval/dense_rerank.py`` of apostolhskouk/ARM@5a6cb92:
``rank(query=..., documents=..., top_k=k, return_documents=True, batch_size=8)``), run in ARM's pins
(``make arm-env``), never in rbench's environment.

    .venv-arm/bin/python tests/reference/mxbai_rank.py PAIRS.json OUT.json

PAIRS.json: ``{"model": FOLDER, "max_length": N or null, "batch_size": N, "queries": [{"query": ...,
"documents": [...], "top_k": N}]}``. OUT.json: per query, ``[[index, score], ...]`` best first, and
the versions that computed them.
"""

import json
import sys
from importlib.metadata import version


def main(pairs_path: str, out_path: str) -> None:
    import torch
    from mxbai_rerank import MxbaiRerankV2

    torch.set_num_threads(1)
    spec = json.loads(open(pairs_path).read())
    options = {"max_length": spec["max_length"]} if spec.get("max_length") else {}
    reranker = MxbaiRerankV2(spec["model"], device="cpu", **options)
    ranked = []
    for item in spec["queries"]:
        results = reranker.rank(query=item["query"], documents=item["documents"], top_k=item["top_k"],
                                return_documents=True, batch_size=spec["batch_size"])
        ranked.append([[r.index, r.score] for r in results])
    versions = {p: version(p) for p in ("mxbai-rerank", "transformers", "torch", "tokenizers")}
    with open(out_path, "w") as f:
        json.dump({"ranked": ranked, "versions": versions}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
