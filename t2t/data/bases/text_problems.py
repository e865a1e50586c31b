"""Tensor2Tensor's `text_problems`: the text problem bases a data set subclasses.

- Text2TextProblem: `generate_samples` yields {"inputs": str, "targets": str}.
- Text2SelfProblem: language modelling, yields {"targets": str}.
- Text2ClassProblem: yields {"inputs": str, "label": int}.
- T2T's other bases and text-file iterators (Text2textTmpdir, ChoppedTextProblem,
  txt_line_iterator, ...): t2t.data.bases.text_problem_bases.

The vocabulary (SentencePiece "subword", "character", "byte" or a fixed "token" list)
is built once from a bounded sample of the training text, saved in data_dir and
reused when present. Every encoded sequence ends with EOS. The classes live in
text_core and text_problem_bases; this module gathers them under T2T's module name.
"""

from t2t.data.bases.text_core import (  # noqa: F401  (T2T's names, re-exported)
    VOCAB_BYTE,
    VOCAB_CHARACTER,
    VOCAB_SUBWORD,
    VOCAB_T2T_SUBWORDS,
    VOCAB_T2T_TOKENS,
    VOCAB_TOKEN,
    VOCAB_TYPES,
    Text2ClassProblem,
    Text2SelfProblem,
    Text2TextProblem,
    TextProblem,
    VocabType,
)
from t2t.data.bases.text_problem_bases import (  # noqa: F401  (T2T's names, re-exported)
    ChoppedTextProblem,
    QuestionAndContext2TextProblem,
    Text2TextRemotedir,
    Text2textTmpdir,
    Text2textTmpdirTokens,
    TextConcat2ClassProblem,
    text2class_txt_iterator,
    text2self_txt_iterator,
    text2text_distill_iterator,
    text2text_generate_encoded,
    text2text_txt_iterator,
    text2text_txt_tab_iterator,
    txt_line_iterator,
)

# The names of Tensor2Tensor's text_problems that text_problem_bases defines.
T2T_BASES = ('Text2textTmpdir', 'Text2textTmpdirTokens', 'TextConcat2ClassProblem', 'QuestionAndContext2TextProblem', 'ChoppedTextProblem', 'Text2TextRemotedir', 'txt_line_iterator', 'text2text_txt_iterator', 'text2text_txt_tab_iterator', 'text2self_txt_iterator', 'text2class_txt_iterator', 'text2text_distill_iterator', 'text2text_generate_encoded')
