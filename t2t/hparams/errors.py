"""HParamsError, in a module of its own below t2t.hparams.hparams and
t2t.hparams.t2t_names, which both raise it (`from t2t.hparams.hparams import
HParamsError` keeps working)."""


class HParamsError(ValueError):
    """A bad hyperparameter name, value or override string."""
