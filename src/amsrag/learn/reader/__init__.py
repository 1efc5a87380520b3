"""The span reader: training data, fine-tuning, ONNX export and int8 quantisation, evaluation."""
