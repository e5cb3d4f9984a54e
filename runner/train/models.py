"""The trainer's models: Keras application architectures (no weights downloaded) and two small CPU models.

Importing this module is cheap; TensorFlow is imported inside ``build_model``. Every model returns
logits (no softmax), so the loss is a cross-entropy from logits, as upstream computes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model's input and dataset: ``image_size`` pixels square, 3 channels."""

    name: str
    dataset: str  # "imagenet" or "cifar10": what upstream pairs the model with
    image_size: int
    num_classes: int


SPECS = {
    "trivial": ModelSpec("trivial", "imagenet", 224, 1000),
    "resnet20": ModelSpec("resnet20", "cifar10", 32, 10),
    "resnet50": ModelSpec("resnet50", "imagenet", 224, 1000),
    "resnet101": ModelSpec("resnet101", "imagenet", 224, 1000),
    "resnet152": ModelSpec("resnet152", "imagenet", 224, 1000),
    "inception3": ModelSpec("inception3", "imagenet", 299, 1000),
    "vgg16": ModelSpec("vgg16", "imagenet", 224, 1000),
    "mobilenet": ModelSpec("mobilenet", "imagenet", 224, 1000),
}
MODEL_NAMES = tuple(SPECS)

_APPLICATIONS = {
    "resnet50": "ResNet50", "resnet101": "ResNet101", "resnet152": "ResNet152",
    "inception3": "InceptionV3", "vgg16": "VGG16", "mobilenet": "MobileNet",
}


def input_shape(spec: ModelSpec, data_format: str) -> tuple[int, int, int]:
    """One image's shape in ``data_format`` (NHWC or NCHW)."""
    s = spec.image_size
    return (3, s, s) if data_format == "NCHW" else (s, s, 3)


def build_model(name: str, data_format: str) -> Any:
    """A fresh ``tf.keras.Model`` for ``name`` (a key of SPECS), randomly initialised.

    Call it inside the distribution strategy's scope so its variables are placed by the strategy.
    Raises KeyError for an unknown name.
    """
    import tensorflow as tf

    spec = SPECS[name]
    tf.keras.backend.set_image_data_format("channels_first" if data_format == "NCHW" else "channels_last")
    shape = input_shape(spec, data_format)
    if name == "trivial":
        return _trivial(tf, shape, spec.num_classes)
    if name == "resnet20":
        return _cifar_resnet(tf, shape, spec.num_classes, blocks_per_stage=3, axis=1 if data_format == "NCHW" else -1)
    app = getattr(tf.keras.applications, _APPLICATIONS[name])
    return app(weights=None, input_shape=shape, classes=spec.num_classes, classifier_activation=None)


def _trivial(tf: Any, shape: tuple[int, int, int], classes: int) -> Any:
    """One strided convolution, global pooling and a dense layer: for fast tests of the harness."""
    inputs = tf.keras.Input(shape)
    x = tf.keras.layers.Conv2D(8, 3, strides=4, activation="relu")(inputs)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(classes)(x), name="trivial")


def _cifar_resnet(tf: Any, shape: tuple[int, int, int], classes: int, blocks_per_stage: int, axis: int) -> Any:
    """He et al. (2016) CIFAR ResNet (6n+2 layers, n = blocks_per_stage), built as tf_cnn_benchmarks'
    ``resnet20`` (v1) is, so both train the same network: 16/32/64 filters; a stem convolution with
    batch normalisation and no ReLU; basic blocks; where a stage halves the size, the paper's option-A
    shortcut (1x1 average pooling with stride 2, then zero channels padded on both sides) rather than a
    projection convolution; batch normalisation with decay 0.9 and epsilon 1e-5 (upstream's
    batch_norm_config); a spatial mean and the dense logits. ``axis`` is the channel axis."""
    layers = tf.keras.layers

    def bn(x: Any) -> Any:
        return layers.BatchNormalization(axis=axis, momentum=0.9, epsilon=1e-5)(x)

    def shortcut(x: Any, filters: int, strides: int) -> Any:
        if x.shape[axis] == filters:
            return x
        pooled = layers.AveragePooling2D(1, strides, data_format="channels_first" if axis == 1 else "channels_last")(x)
        pad = (filters - x.shape[axis]) // 2
        paddings = [[0, 0], [0, 0], [0, 0], [0, 0]]
        paddings[axis] = [pad, pad]
        return tf.pad(pooled, paddings)

    fmt = "channels_first" if axis == 1 else "channels_last"
    inputs = tf.keras.Input(shape)
    x = bn(layers.Conv2D(16, 3, padding="same", use_bias=False, data_format=fmt)(inputs))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(blocks_per_stage):
            strides = 2 if stage > 0 and block == 0 else 1
            y = layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False, data_format=fmt)(x)
            y = layers.ReLU()(bn(y))
            y = bn(layers.Conv2D(filters, 3, padding="same", use_bias=False, data_format=fmt)(y))
            x = layers.ReLU()(layers.Add()([y, shortcut(x, filters, strides)]))
    x = layers.GlobalAveragePooling2D(data_format=fmt)(x)
    return tf.keras.Model(inputs, layers.Dense(classes)(x), name=f"resnet{6 * blocks_per_stage + 2}")
