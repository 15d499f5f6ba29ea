# The strategy given as an object: Fabric with DeepSpeedStrategy and a "-true" precision.
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

PRECISION = "16-true"
fabric = Fabric(devices=4, strategy=DeepSpeedStrategy(stage=3), precision=PRECISION)  # ampdoctor: expect[AMP116]
