"""Test-session settings shared by the test suite and the doctests.

Everything here runs before any test module imports huggingface_hub / evaluate / datasets, so the Hub
client never reaches the network: tests that need a Hub start a local Hub-API server and point
``HF_ENDPOINT`` at it in a subprocess or before importing.
"""

import os
import tempfile

# A private Hugging Face home for the whole session: evaluate, datasets and the Hub client write their
# caches here, never into the user's ~/.cache/huggingface.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="slmsql-test-hf-")
os.environ.pop("HF_MODULES_CACHE", None)
os.environ.pop("HF_DATASETS_CACHE", None)
os.environ.pop("HF_HUB_CACHE", None)

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
