"""Image -> text hparams sets: a Transformer with an image encoder (t2t additions).

The Transformer's encoder reads an image through t2t.models.image_encoder (Tensor2Tensor
captioned with other models).

transformer_image_text_tiny   text lines (ocr_rendered_text) on a CPU: 3 conv stages,
                              one position per column;
transformer_image_captioning  photos (image_ms_coco_characters, _tokens32k): a ResNet-18
                              encoder, one position per cell of its 14 x 14 map (224 px),
                              transformer_base's sizes otherwise;
transformer_image_captioning_tiny  the same shape, small enough for tests and CPU demos.
Images are counted in examples: batch_size is images per batch, not tokens.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.transformer import transformer_base, transformer_tiny


def add_image_encoder_hparams(hp: HParams) -> HParams:
    """Adds the image encoder's hparams (t2t.models.image_encoder) with their defaults:
    3 conv stages (2 convolutions each, batch norm) of 32, 64, 128 channels, raster
    order. (Layer norm in place of batch norm, or one convolution per stage, did not
    learn to read ocr_rendered_text's lines in 400 steps here; this does in 300.)"""
    hp.add_hparam("image_encoder", "conv")  # or "resnet", "xception"
    hp.add_hparam("image_encoder_layers", 3)  # "conv": stride-2 stages
    hp.add_hparam("image_encoder_width_layers", -1)  # "conv": stages that halve the width
    hp.add_hparam("image_encoder_convs", 2)  # "conv": 3x3 convolutions per stage
    hp.add_hparam("image_encoder_channels", 32)  # of the first stage; doubling per stage
    hp.add_hparam("image_encoder_resnet_blocks", [2, 2, 2, 2])  # "resnet": blocks per stage
    hp.add_hparam("image_encoder_xception_blocks", 8)  # "xception": middle-flow blocks
    hp.add_hparam("image_encoder_flatten", "raster")  # or "columns"
    # Joint CTC-attention training (t2t.layers.ctc) over the encoder's positions: 0 off.
    hp.add_hparam("ctc_loss_weight", 0.0)
    return hp


@registry.register_hparams
def transformer_image_text_tiny() -> HParams:
    """ocr_rendered_text on a CPU: 32 x 384 strips -> 96 column positions (4 px each) of
    depth 4 x 128, with joint CTC training (weight 0.3) of the encoder."""
    hp = add_image_encoder_hparams(transformer_tiny())
    hp.image_encoder_flatten = "columns"
    hp.image_encoder_width_layers = 2
    hp.ctc_loss_weight = 0.3
    hp.batch_size = 32  # images
    hp.learning_rate_warmup_steps = 400
    return hp


@registry.register_hparams
def transformer_image_captioning() -> HParams:
    """Captioning at transformer_base's sizes with a ResNet-18 encoder (224 px -> 196
    positions of 512 channels)."""
    hp = add_image_encoder_hparams(transformer_base())
    hp.image_encoder = "resnet"
    hp.image_encoder_channels = 64
    hp.batch_size = 64  # images
    return hp


@registry.register_hparams
def transformer_image_captioning_tiny() -> HParams:
    """transformer_image_captioning's shape at transformer_tiny's sizes, a 2-stage ResNet."""
    hp = add_image_encoder_hparams(transformer_tiny())
    hp.image_encoder = "resnet"
    hp.image_encoder_channels = 16
    hp.image_encoder_resnet_blocks = [1, 1]
    hp.batch_size = 8
    return hp
