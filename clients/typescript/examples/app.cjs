// app.mjs for CommonJS tests: signUp(address) mails a 6-digit code over SMTP.
exports.signUp = async (address) => (await import('./app.mjs')).signUp(address);
