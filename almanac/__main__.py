from almanac.cli import main

main()
