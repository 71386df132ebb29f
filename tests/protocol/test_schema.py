import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.protocol.schema import Triple, check_rules, is_generic_subject, load_schema


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def test_schema_has_the_finreflectkg_types_and_relations(schema):
    assert len(schema.entity_types) == 24
    assert len(schema.relations) == 29
    assert {"ORG", "COMP", "FIN_METRIC", "COMMENTARY"} <= set(schema.entity_types)
    assert {"Has_Stake_In", "Discloses", "Partners_With"} <= set(schema.relations)
    assert all(description.strip() for description in schema.entity_types.values())


def test_enums_constrain_the_json_schema(schema):
    json_schema = schema.triple_model.model_json_schema()
    enums = {name: d["enum"] for name, d in json_schema["$defs"].items()}
    assert sorted(enums["EntityType"]) == sorted(schema.entity_types)
    assert sorted(enums["Relation"]) == sorted(schema.relations)
    assert json_schema["properties"]["subject"]["maxLength"] == 60
    valid = {
        "subject": "AAPL",
        "subject_type": "ORG",
        "relation": "Depends_On",
        "object": "TSMC",
        "object_type": "COMP",
    }
    assert schema.triple_model.model_validate(valid).relation.value == "Depends_On"
    with pytest.raises(ValueError, match=r"relation\n  Input should be 'Has_Stake_In', .*'Loves'"):
        schema.triple_model.model_validate({**valid, "relation": "Loves"})


def test_canonical_relation_matches_domyn_lowercase(schema):
    assert schema.canonical_relation("subject_to") == "Subject_To"
    assert schema.canonical_relation("has stake in") == "Has_Stake_In"
    assert schema.canonical_relation("distributes") is None


@pytest.mark.parametrize(
    ("subject", "generic"),
    [
        ("we", True),
        ("The Company", True),
        ("our business", True),
        ("It", True),
        ("Company", True),
        ("AAPL", False),
        ("The Coca-Cola Company", False),
        ("Company-operated stores", False),
        ("Apple Services", False),
        ("US", False),
        ("US Treasury", False),
        ("IT Services", False),
        ("Its subsidiaries", True),
    ],
)
def test_generic_subjects(subject, generic):
    assert is_generic_subject(subject) is generic


def test_check_rules_rates_by_hand(schema):
    triples = [
        # passes all four
        Triple.from_tuple(["AAPL", "ORG", "Depends_On", "TSMC", "COMP"]),
        # generic subject only
        Triple.from_tuple(["The Company", "ORG", "Operates_In", "China", "GPE"]),
        # object of 7 words, and relation off-schema
        Triple.from_tuple(
            ["MSFT", "ORG", "Distributes", "a very long name of some product", "PRODUCT"]
        ),
        # object type off-schema
        Triple.from_tuple(["JPM", "ORG", "Discloses", "Net income", "METRIC"]),
    ]
    report = check_rules(triples, schema)
    assert report.n_triples == 4
    assert report.subject_reference == 3 / 4
    assert report.entity_length == 3 / 4
    assert report.entity_schema == 3 / 4
    assert report.relation_schema == 3 / 4
    assert report.all_rules == 1 / 4


def test_check_rules_on_nothing_is_undefined(schema):
    report = check_rules([], schema)
    assert report.n_triples == 0 and report.all_rules is None and report.entity_length is None


def test_bad_schema_file_names_file_and_field(tmp_path):
    path = tmp_path / "schema.yaml"
    path.write_text("name: x\nversion: 1\nentity_types: {ORG: ''}\nrelations: {A: b}\n")
    with pytest.raises(FinReflectError, match=r"schema\.yaml: field 'entity_types'"):
        load_schema(path)
    path.write_text("name: [unclosed\n")
    with pytest.raises(FinReflectError, match="not valid YAML"):
        load_schema(path)
