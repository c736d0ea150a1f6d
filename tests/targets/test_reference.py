"""docs/ops.md is the op reference generated from the registry and the targets' tables: it must be the generated
text (run `python -m spikec.targets.reference --write` after changing an op), and it says what the schemas say."""
from spikec.ops import OPS, Param, define
from spikec.targets import reference


def test_committed_reference_is_the_generated_one():
    assert reference.PATH.is_file(), "docs/ops.md is missing: run `python -m spikec.targets.reference --write`"
    assert reference.PATH.read_text() == reference.render(), \
        "docs/ops.md is stale: run `python -m spikec.targets.reference --write`"


def test_every_op_has_an_entry_with_its_layouts():
    text = reference.render()
    for name, d in OPS.items():
        assert f"### `{name}`" in text, name
        for p in d.params:
            assert f"| `{p.name}` |" in text, (name, p.name)
    assert "| `weight` | `(C_out, C_in/groups, kH, kW)` | yes |" in text
    assert "| `threshold` | `() or (C,)` | yes | firing threshold |" in text
    assert "arity 1 · flags: `stateful`, `neuron` · lowered by: onnx, nir, lava · defined in `spikec.ops.neurons`" \
        in text


def test_an_op_defined_by_names_only_reads_unspecified():
    define("reference_test_op", 2, lambda n, i: i[0], ("w",), ("b",), stateful=True, doc="a test op")
    try:
        entry = reference.op_entry(OPS["reference_test_op"], {"onnx": set(), "nir": set(), "lava": set()})
    finally:
        OPS.pop("reference_test_op")
    assert "arity 2 · flags: `stateful` · lowered by: no target" in entry
    assert "| `w` | unspecified | yes |  |" in entry and "| `b` | unspecified | no |  |" in entry


def test_a_schema_change_makes_the_reference_stale():
    before = reference.render()
    d = OPS["tdm"]
    OPS["tdm"] = d.__class__(**{**d.__dict__, "params": (Param("lam", "(C, 1)", "changed"),),
                                "required": (), "optional": ()})
    try:
        assert reference.render() != before
    finally:
        OPS["tdm"] = d
