from amsrag.learn.monitor.reference import main

main()
