"""The mail sender of the example suite: what the app under test would do,
here smtplib from this machine (one IP) to Mayfly's SMTP port, one
connection per mail. MAYFLY_SMTP is host:port (default 127.0.0.1:2525, what
`make run` serves); the API is the plugin's --mayfly-url / $MAYFLY_URL."""

import os
import smtplib
from email.message import EmailMessage

import pytest


@pytest.fixture(scope="session")
def send_mail():
    host, _, port = os.environ.get("MAYFLY_SMTP", "127.0.0.1:2525").rpartition(":")

    def send(to: str, subject: str, text: str) -> None:
        m = EmailMessage()
        m["From"] = "Shop <no-reply@shop.example>"
        m["To"] = to
        m["Subject"] = subject
        m.set_content(text)
        with smtplib.SMTP(host, int(port), timeout=10) as s:
            s.send_message(m)

    return send
