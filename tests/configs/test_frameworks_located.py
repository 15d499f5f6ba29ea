"""The shared located-document loader: values as json/yaml/shell read them, plus the line/column of every key."""

from pathlib import Path

from ampdoctor.frameworks.located import load_documents


def _load(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return load_documents(path)


def test_json_keys_are_located_by_line_and_column(tmp_path):
    docs, error = _load(tmp_path, "ds.json", '{\n  "bf16": {\n      "enabled": true\n  },\n  "x": [1, {"y": 2}]\n}\n')
    assert error is None
    doc = docs[0]
    assert doc.get("bf16", "enabled") is True
    assert (doc.at("bf16", "enabled").line, doc.at("bf16", "enabled").column) == (3, 7)
    assert doc.at("x", 1, "y").line == 5
    # A missing key points at its nearest written ancestor.
    assert doc.at("bf16", "loss_scale").line == 2


def test_json_escaped_keys_and_duplicates_follow_json_semantics(tmp_path):
    docs, error = _load(tmp_path, "a.json", '{"a\\u0062": 1,\n "ab": 2}')
    assert error is None
    assert docs[0].get("ab") == 2 and docs[0].at("ab").line == 2


def test_malformed_json_reports_parser_line_and_column(tmp_path):
    docs, error = _load(tmp_path, "bad.json", '{\n  "bf16": {"enabled": true,}\n}\n')
    assert docs == [] and error is not None
    assert error.file.endswith("bad.json") and (error.line, error.column) == (2, 28)


def test_yaml_keys_are_located_in_block_and_flow_style(tmp_path):
    docs, error = _load(tmp_path, "c.yml", '# c\n{\n  "precision": "bfloat16",\n  "bf16": {"enabled": true},\n}\n')
    assert error is None
    doc = docs[0]
    assert doc.at("precision").line == 3 and doc.at("bf16", "enabled").line == 4


def test_yaml_merge_keys_and_application_tags_are_read(tmp_path):
    text = "base: &b\n  mixed_precision: bf16\nrun:\n  <<: *b\n  ref: !Ref Foo\n"
    docs, error = _load(tmp_path, "t.yaml", text)
    assert error is None
    assert docs[0].get("run", "mixed_precision") == "bf16" and docs[0].get("run", "ref") == "Foo"


def test_malformed_yaml_reports_line(tmp_path):
    docs, error = _load(tmp_path, "bad.yaml", "trainer:\n  precision: bf16-mixed\n strategy: [ddp\n")
    assert docs == [] and error is not None and error.line == 3


def test_env_file_exports_quotes_and_expansion(tmp_path):
    text = "# run\nexport A=1\nB='x y'\nexport C=\"${A} --flag=2\"\nif true; then echo; fi\n"
    docs, error = _load(tmp_path, "config.env", text)
    assert error is None
    doc = docs[0]
    assert doc.get("A") == "1" and doc.get("B") == "x y" and doc.get("C") == "1 --flag=2"
    assert (doc.at("C").line, doc.at("C").column) == (4, 8)


def test_env_value_may_span_lines_but_an_unclosed_quote_is_an_error(tmp_path):
    docs, error = _load(tmp_path, "ok.env", 'A="--a\n--b"\nB=2\n')
    assert error is None and docs[0].get("A") == "--a\n--b" and docs[0].at("B").line == 3
    docs, error = _load(tmp_path, "bad.env", 'A=1\nexport TRAINER_EXTRA_ARGS="--x=1\nB=2\n')
    assert error is not None and error.line == 2 and "TRAINER_EXTRA_ARGS" in error.message
