"""Problems: the data sets, grouped by family; the framework they use is `t2t.data`.

    algorithmic_tasks/  algorithmic and synthetic tasks (no download)
    text/               language modelling, classification, summarization
    translation/        WMT, IWSLT and the offline En-Vi gettext corpus
    image/              classification, generation, captioning, OCR
    audio/              speech recognition

Every module here (and in t2t.data) is imported when the registry first lists or looks
up a problem, so a new data set is one new file with one decorated class in its family.

The modules that lived directly in this package before the data path got its folders
(and Tensor2Tensor's paths that t2t.compat maps here) still import from their old
names: `from t2t.problems import problem, text_problems, generator_utils,
text_encoder` gives the modules of t2t.data (the same module objects, not copies).
`MOVED_MODULES` lists them; `python -m t2t.problems.<old name>` runs the new module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

# Old module name in this package -> where it lives now.
MOVED_MODULES = {
    "algorithmic": "t2t.problems.algorithmic_tasks.algorithmic",
    "catalog": "t2t.data.inspection.catalog",
    "cifar": "t2t.problems.image.cifar",
    "cnn_dailymail": "t2t.problems.text.cnn_dailymail",
    "download": "t2t.data.generation.download",
    "encoder_base": "t2t.data.encoders.encoder_base",
    "extract": "t2t.data.generation.extract",
    "generator_utils": "t2t.data.generation.generator_utils",
    "image_generation": "t2t.problems.image.image_generation",
    "image_problems": "t2t.data.bases.image_problems",
    "image_utils": "t2t.data.bases.image_utils",
    "imagenet": "t2t.problems.image.imagenet",
    "imdb": "t2t.problems.text.imdb",
    "input_pipeline": "t2t.data.pipeline.input_pipeline",
    "inspect_data": "t2t.data.inspection.inspect_data",
    "length_report": "t2t.data.pipeline.length_report",
    "librispeech": "t2t.problems.audio.librispeech",
    "lm1b": "t2t.problems.text.lm1b",
    "mnist": "t2t.problems.image.mnist",
    "mscoco": "t2t.problems.image.mscoco",
    "multi_problem": "t2t.data.multi_problem",
    "ocr": "t2t.problems.image.ocr",
    "overlap": "t2t.data.inspection.overlap",
    "problem": "t2t.data.problem",
    "ptb": "t2t.problems.text.ptb",
    "sentencepiece_encoder": "t2t.data.encoders.sentencepiece_encoder",
    "sentences": "t2t.problems.text.sentences",
    "speech": "t2t.data.bases.speech",
    "speech_espeak": "t2t.problems.audio.speech_espeak",
    "subword_encoder": "t2t.data.encoders.subword_encoder",
    "subword_sampling": "t2t.data.pipeline.subword_sampling",
    "synthetic": "t2t.problems.algorithmic_tasks.synthetic",
    "synthetic_pairs": "t2t.data.synthetic_pairs",
    "t2t_style": "t2t.data.t2t_style",
    "text_encoder": "t2t.data.encoders.text_encoder",
    "text_files": "t2t.problems.text.text_files",
    "text_problem_bases": "t2t.data.bases.text_problem_bases",
    "text_problems": "t2t.data.bases.text_problems",
    "tfds_adapter": "t2t.data.tfds.adapter",
    "tfds_features": "t2t.data.tfds.features",
    "tfds_names": "t2t.data.tfds.names",
    "tfds_problem_base": "t2t.data.tfds.problem_base",
    "tokenizer": "t2t.data.encoders.tokenizer",
    "translate": "t2t.data.bases.translate",
    "translate_encs": "t2t.problems.translation.translate_encs",
    "translate_ende": "t2t.problems.translation.translate_ende",
    "translate_enfr": "t2t.problems.translation.translate_enfr",
    "translate_envi": "t2t.problems.translation.translate_envi",
    "translate_gettext": "t2t.problems.translation.translate_gettext",
    "vocab_encoders": "t2t.data.encoders.vocab_encoders",
    "vocab_files": "t2t.data.encoders.vocab_files",
    "wikitext103": "t2t.problems.text.wikitext103",
}


def available() -> list[str]:
    """Every registered problem's name, sorted (Tensor2Tensor's `problems.available()`;
    importing the problem modules on the first call, as the registry does)."""
    from t2t import registry

    return sorted(registry.list_problems())


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads `t2t.problems.<old>` as the module it moved to (one object, two names)."""

    def __init__(self, target: str):
        self.target = target
        self.target_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias spec on the real module; give it back its own.
        module.__spec__ = self.target_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """For `python -m t2t.problems.<old name>`: the new module's code."""
        module = importlib.import_module(self.target)
        return module.__spec__.loader.get_code(self.target)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of MOVED_MODULES; nothing else."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED_MODULES:
            return None
        target = MOVED_MODULES[name]
        # origin: the new file (runpy's argv[0], tracebacks); finding it runs no module code.
        origin = importlib.util.find_spec(target).origin
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(target), origin=origin)


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())
