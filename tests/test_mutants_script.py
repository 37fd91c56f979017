"""benchmarks/mutants.py: the configuration it hands mutmut and the inputs it refuses (mutmut itself is not run
here: a module takes minutes)."""

import sys
import tomllib

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import mutants  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))


def test_the_configuration_mutates_one_module_with_its_tests_only():
    conf = tomllib.loads(mutants._config("anatomy_kit/verdicts/multiplicity.py",
                                         ["tests/test_multiplicity.py", "tests/test_report.py"]))["tool"]["mutmut"]
    assert conf["only_mutate"] == ["anatomy_kit/verdicts/multiplicity.py"]
    assert conf["pytest_add_cli_args_test_selection"] == ["tests/test_multiplicity.py", "tests/test_report.py"]
    assert conf["source_paths"] == ["anatomy_kit/"] and "data_manifest" in conf["also_copy"]


def test_every_module_named_exists_with_its_tests_and_every_equivalent_names_a_module_and_a_reason():
    for module, tests in mutants.MODULES.items():
        assert (ROOT / module).is_file() and tests and all((ROOT / t).is_file() for t in tests)
    dotted = {m.removesuffix(".py").replace("/", ".") for m in mutants.MODULES}
    for name, why in mutants.EQUIVALENT.items():
        assert name.rsplit(".", 1)[0] in dotted and why.strip(), name


@pytest.mark.parametrize("argv, message", [
    (["--children", "0"], "--children=0 must be at least 1"),
    (["anatomy_kit/verdicts/claims.py"], "no tests known for ['anatomy_kit/verdicts/claims.py']"),
])
def test_bad_arguments_are_refused_before_any_work(argv, message, capsys):
    with pytest.raises(SystemExit):
        mutants.main(argv)
    assert message in capsys.readouterr().err


def test_an_unknown_module_or_missing_tests_are_named():
    with pytest.raises(SystemExit, match="module 'anatomy_kit/nothing.py' is not a file of the project"):
        mutants.score("anatomy_kit/nothing.py", ["tests/test_multiplicity.py"])
    with pytest.raises(SystemExit, match=r"tests \['tests/test_nothing.py'\] do not exist"):
        mutants.score("anatomy_kit/verdicts/multiplicity.py", ["tests/test_nothing.py"])
