/** Secret masking for the worker's own log lines. */
import { redactor } from '../../worker/redact.js';

describe('redactor', () => {
  test('masks every occurrence of every secret in a string', () => {
    const redact = redactor(['s3cret', 'tok-123']);
    expect(redact('token=tok-123 pass=s3cret again=s3cret')).toBe('token=*** pass=*** again=***');
  });

  test('masks a secret that contains another as a whole', () => {
    const redact = redactor(['abc', 'xxabcxx']);
    expect(redact('[xxabcxx] [abc]')).toBe('[***] [***]');
  });

  test('works on bytes without decoding them', () => {
    const redact = redactor(['pässword']);
    const input = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('key=pässword;'), Buffer.from([0x80])]);
    const expected = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('key=***;'), Buffer.from([0x80])]);
    expect(redact(input)).toEqual(expected);
  });

  test('ignores empty secrets and leaves clean text alone', () => {
    const redact = redactor(['', 'hidden']);
    expect(redact('nothing to see')).toBe('nothing to see');
    expect(redactor([])('hidden')).toBe('hidden');
  });
});
