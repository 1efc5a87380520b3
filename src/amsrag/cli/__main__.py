from amsrag.cli.main import main

main()
