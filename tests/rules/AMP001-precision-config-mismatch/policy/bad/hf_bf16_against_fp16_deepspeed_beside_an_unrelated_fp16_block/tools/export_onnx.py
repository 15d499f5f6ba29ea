import json
import sys


def main():
    export = {"opset": 17, "fp16": {}}
    export["fp16"]["enabled"] = sys.argv[2] == "half"
    json.dump(export, open(sys.argv[1], "w"))
