// Starts the signup app in the runner's process; the workers read its URL
// from SIGNUP_APP_URL (the environment a global setup sets is theirs).
import { startApp } from './app.mjs';

export default async function globalSetup() {
  if (!process.env.MAYFLY_URL) throw new Error('MAYFLY_URL (the Mayfly API base, ending in /v1) is not set');
  const app = await startApp({ smtp: process.env.MAYFLY_SUITE_SMTP });
  process.env.SIGNUP_APP_URL = app.url;
  return async () => {
    console.log(`signup app: ${app.sent} mails sent`);
    await app.close();
  };
}
