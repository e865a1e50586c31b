"""Tests of the lazy module proxy."""

import subprocess
import sys


def test_import_happens_on_first_attribute_use():
    code = (
        "import sys\n"
        "from t2t.utils.lazy_import import lazy_module\n"
        "json_mod = lazy_module('json')\n"
        "sys.modules.pop('json', None)\n"
        "assert 'json' not in sys.modules\n"
        "assert json_mod.dumps([1]) == '[1]'\n"
        "assert 'json' in sys.modules\n"
        "assert 'dumps' in dir(json_mod)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
