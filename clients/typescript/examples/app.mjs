// A stand-in for the application under test: "signing up" mails a 6-digit
// code to the address, over SMTP to Mayfly (MAYFLY_SMTP, default make run's
// 127.0.0.1:2525). In a real suite this is your app's signup form or API.

import { randomInt } from 'node:crypto';
import { sendMail } from './smtp.mjs';

export async function signUp(address) {
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  await sendMail(process.env.MAYFLY_SMTP ?? '127.0.0.1:2525', {
    to: address, subject: 'Your code', text: `Welcome! Your verification code is ${code}.`,
  });
  return code;
}
