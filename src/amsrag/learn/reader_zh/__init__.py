"""Training of the Chinese span reader (`amsrag.generate.zh_reader`) on CMRC 2018."""
