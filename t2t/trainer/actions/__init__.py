"""What a TrainingLoop runs besides its steps, as actions registered on it (Orbit's idea).

Each action is its own module; `standard.standard_actions` builds the ones a
TrainerConfig asks for, in the order the loop runs them:

- `early_stopping.EarlyStopping`: stop when an eval metric has plateaued (T2T's rule);
- `keep_best.KeepBest`: keep the best checkpoints by an eval metric in OUTPUT_DIR/best;
- `layer_summaries.LayerSummaries`: per-layer norms and update ratios on logged steps;
- `decode_summaries.DecodeSummaries`: a few dev examples decoded greedily (TensorBoard text);
- `image_samples.ImageSamples`: images sampled by an image-target model (TensorBoard image).

`base.LoopAction` says when the loop calls an action and with what.
"""
