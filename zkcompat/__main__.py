from zkcompat.cli import main

main()
