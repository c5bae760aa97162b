from zkcompat.cli.main import main

main()
