from gramagent.cli import main

main()
