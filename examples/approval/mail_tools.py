"""The mailer example's tool (it only pretends to send): ``--tools mail_tools:library``."""

from gramagent import ToolLibrary

library = ToolLibrary()


@library.register
def sendMail(to: str, subject: str) -> str:
    """Sends an e-mail to one address"""
    return f"sent {subject!r} to {to}"
