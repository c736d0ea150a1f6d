"""The package stays readable: no module over 600 lines, no function over 100 (README conventions)."""
import ast
from pathlib import Path

SPIKEC = Path(__file__).resolve().parents[1] / "spikec"


def test_no_module_over_600_lines_and_no_function_over_100():
    too_long = []
    for path in sorted(SPIKEC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 600:
            too_long.append(f"{path.relative_to(SPIKEC.parent)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                too_long.append(f"{path.relative_to(SPIKEC.parent)}:{node.lineno} {node.name}: "
                                f"{node.end_lineno - node.lineno + 1} lines")
    assert not too_long, too_long
