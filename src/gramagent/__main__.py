from gramagent._cli import main

main()
