"""tools/*.py loaded as modules (tools/ is no package): one module object per file, shared by the tests."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    """``tools/<name>.py`` as the module ``spikec_tools_<name>``, loaded once."""
    key = f"spikec_tools_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]
