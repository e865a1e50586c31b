"""translate_envi_gettext8k: English -> Vietnamese pairs read from gettext catalogs."""

import os
import struct

import pytest

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.problems.translation import translate_gettext as gettext_lib

# Real messages of GNU coreutils with their Vietnamese translations (coreutils.mo).
PAIRS = [
    ("cannot print only names or real IDs in default format",
     "không thể chỉ in tên hoặc ID thật ở dạng mặc định"),
    ("target directory not allowed when installing a directory",
     "không cho phép dùng thư mục đích khi cài đặt thư mục"),
    ("ignoring non-option arguments", "đang bỏ qua các đối số không-phải-tùy-chọn"),
    ("too many characters in set", "quá nhiều ký tự trong tập hợp"),
    ("missing equivalence class character '[==]'", "thiếu ký tự lớp tương đương “[==]”"),
    ("waiting for child process", "đợi tiến trình con"),
    ("strip process terminated abnormally", "tiến trình strip đã kết thúc bất thường"),
    ("Fifos do not have major and minor\ndevice numbers.",
     "FIFO không có các số thiết bị lớn và nhỏ."),
    ("too many input lines", "quá nhiều dòng đầu vào"),
    ("missing character class name '[::]'", "thiếu tên lớp của ký tự “[::]”"),
    ("cannot split in more than one way", "không thể chia theo vài cách"),
]


def write_catalog(path, entries):
    """A GNU .mo file (little-endian) of (msgid, msgstr) byte strings, sorted by msgid."""
    entries = sorted(entries)
    count = len(entries)
    originals, translations = 28, 28 + 8 * count
    data_start = 28 + 16 * count
    blob, table_o, table_t = b"", b"", b""
    for source, _ in entries:
        table_o += struct.pack("<2I", len(source), data_start + len(blob))
        blob += source + b"\x00"
    for _, target in entries:
        table_t += struct.pack("<2I", len(target), data_start + len(blob))
        blob += target + b"\x00"
    header = struct.pack("<7I", 0x950412DE, 0, count, originals, translations, 0, 0)
    with open(path, "wb") as f:
        f.write(header + table_o + table_t + blob)


@pytest.fixture()
def tmp_dir(tmp_path):
    folder = tmp_path / "tmp" / gettext_lib.MIRROR_SUBDIR / "vi" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    entries = [(s.encode(), t.encode()) for s, t in PAIRS]
    entries += [(b"", b"Project-Id-Version: coreutils\n"),  # the header: skipped
                (b"untranslated", b""), (b"%s: %d", b"%s: %d"),  # no translation, no letter
                (b"menu\x04too many input lines", b"another translation"),  # a repeat
                (b"%d file\x00%d files", b"%d t\xe1\xba\xadp tin\x00")]  # a plural
    write_catalog(folder / "coreutils.mo", entries)
    return str(tmp_path / "tmp")


def test_catalogs_give_distinct_translated_messages(tmp_dir):
    folder = gettext_lib.catalog_folder(tmp_dir, "vi")
    pairs = dict(gettext_lib.catalog_pairs(folder))
    assert pairs["Fifos do not have major and minor device numbers."].startswith("FIFO")
    assert pairs["%d file"] == "%d tập tin"
    assert "untranslated" not in pairs and "%s: %d" not in pairs and "" not in pairs
    assert len(pairs) == len(PAIRS) + 1
    # A repeated English message keeps the catalog's first (msgids sort: "menu\x04..." first).
    assert pairs["too many input lines"] == "another translation"


def test_splits_are_fixed_by_the_message_and_samples_are_real(tmp_dir):
    problem = registry.problem("translate_envi_gettext8k")
    assert "bleu" in problem.eval_metrics()
    seen = {}
    for split in (problem_lib.TRAIN_SPLIT, problem_lib.DEV_SPLIT, problem_lib.TEST_SPLIT):
        for sample in problem.generate_samples("", tmp_dir, split):
            assert gettext_lib.split_of(sample["inputs"]) == split
            seen[sample["inputs"]] = sample["targets"]
    assert len(seen) == len(PAIRS) + 1
    assert registry.problem("translate_envi_gettext8k_rev").languages == ("vi", "en")


def test_bad_and_missing_catalogs_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.mo"
    bad.write_bytes(b"not a catalog at all")
    with pytest.raises(gettext_lib.CatalogError, match="bad magic number"):
        gettext_lib.read_catalog(str(bad))
    with pytest.raises(problem_lib.DataMissingError, match="No gettext catalogs"):
        list(gettext_lib.catalog_pairs(str(tmp_path / "none")))
    assert os.path.basename(gettext_lib.catalog_folder(str(tmp_path), "vi")) == "LC_MESSAGES"
