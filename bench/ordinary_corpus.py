"""Ordinary text a coding session is full of, none of it a secret: the false-positive corpus.

Prose and code in English and Chinese that talk about passwords, keys and tokens the way people
do ("the password field is required", "reset your password", "密码是必填项", `password: str`),
plus digests, ids, hex dumps, base64 blobs and certificates that are not keys. Hand-written
samples, and templates filled in every combination (deterministic, no randomness), a few hundred
in all. Written for bench_redaction.py; nothing here is used by the redactor.
"""

from __future__ import annotations

import hashlib
import itertools

PROSE_EN = [
    "The password field is required.",
    "Reset your password from the account settings page.",
    "Your password is incorrect, please try again.",
    "The password is hashed with bcrypt before it is stored.",
    "My password is the same as the one I use for the VPN, which is why I want to rotate it.",
    "The password must be at least 12 characters long and include a digit.",
    "If the password is empty the login form shows an error.",
    "The password is not logged anywhere; we checked the middleware.",
    "Password managers generate a unique password for every site.",
    "The admin password was changed last week by the on-call engineer.",
    "We should never send the password in a query string.",
    "Forgot password? We will email you a link.",
    "The password policy is enforced on the server, not in the browser.",
    "The password prompt appears twice because sudo asks again after the timeout.",
    "Passwords are compared in constant time to avoid timing attacks.",
    "The passphrase is what unlocks the key on disk; it never leaves the machine.",
    "The PIN code is sent by SMS and expires after five minutes.",
    "The pw column in the legacy table is always null now.",
    "The pwd command prints the working directory.",
    "The passcode screen locks after three wrong attempts.",
    "The password is stored in the vault and injected at deploy time.",
    "The password was correct but the account was locked.",
    "The password should be rotated every ninety days according to the policy.",
    "The new password will be required at the next login.",
    "Is the password required for the read-only replica?",
    "The private key never leaves the hardware module; only the public key is exported.",
    "The signing key is stored in the KMS and referenced by its alias.",
    "The API key is read from the environment at start-up.",
    "The secret key must be kept out of the repository.",
    "The encryption key is rotated automatically by the cloud provider.",
    "The key insight is that the cache key must include the user id.",
    "Each API key is hashed and only the last four characters are shown.",
    "The session key is negotiated during the TLS handshake.",
    "The seed is fixed so the tests are reproducible.",
    "The master key is split into shares using Shamir's scheme.",
    "GitHub tokens start with ghp_ and AWS access key ids with AKIA; never commit them.",
    "The token expires after one hour and is refreshed in the background.",
    "The tokenizer splits text into tokens, and max_tokens caps the output.",
    "Bearer tokens go in the Authorization header, not in the URL.",
    "The commit a3f5b2c fixed the race in the token refresh loop.",
    "I ran sha256sum on the tarball and the digest matched the release notes.",
    "The request id is logged with every line so we can follow a request.",
    "Run `git log --oneline` to see the short hashes of recent commits.",
    "The fingerprint of the signing key is shown by `gpg --fingerprint`.",
    "The certificate chain is valid until next March.",
    "Base64 makes binary data safe to paste, but it is not encryption.",
    "The hex dump shows the file starts with the PNG magic bytes.",
    "Use a random 256-bit key, not a password, for AES-GCM.",
    "The deploy script reads the secret from the CI store and never prints it.",
    "Authentication failed because the token had expired.",
    "The secretary filed the report and the author signed off on the key findings.",
    "A bearer of good news is always welcome.",
    "Keep secrets out of logs: redact them before anything is written.",
    "The password reset email contains a one-time link, not the password.",
    "Passwords are case sensitive; usernames are not.",
    "The password for the test user is in the fixtures file, generated at run time.",
    "The password to the staging database is managed by Terraform.",
    "The password of the service account is rotated by the operator.",
    "The password is being migrated to Argon2 this quarter.",
    "The password was reset successfully.",
]

PROSE_ZH = [
    "密码是必填项。",
    "密码是正确的，但账号被锁定了。",
    "请在账户设置页面重置密码。",
    "密码长度至少 12 位，需要包含数字和符号。",
    "密码为空时登录表单会提示错误。",
    "密码会先用 bcrypt 加盐哈希再存储。",
    "不要把密码写进代码里，应该使用环境变量或者密钥管理服务。",
    "密钥轮换完成后，请通知所有依赖该服务的团队。",
    "令牌会在一小时后过期，客户端需要自动刷新。",
    "私钥不能离开硬件模块，只导出公钥。",
    "密码错误次数过多，账号会被临时冻结。",
    "忘记密码可以通过邮箱找回。",
    "管理员上周修改了数据库的密码。",
    "密码是用户自己设置的，我们看不到。",
    "口令策略由服务端强制执行。",
    "这个接口的作用是根据用户的输入返回相关的记忆条目。",
    "我们在周五的会议上讨论了缓存键的设计以及分词器的性能问题。",
    "部署脚本会先检查配置文件，然后启动服务并输出日志。",
    "我把 API 密钥放在环境变量里了，不会提交到仓库。",
    "令牌：请在设置页面生成，不要发到群里。",
    "会话在 30 分钟无操作后过期，刷新令牌有效期为 7 天。",
    "密码为必填字段，不能为空。",
    "密码是否正确由认证服务判断。",
    "提交哈希 a3f5b2c 修复了令牌刷新时的竞态问题。",
    "证书的有效期到明年三月。",
    "签名密钥存放在 KMS 里，通过别名引用。",
    "支付密码和登录密码是两套不同的系统。",
    "初始密码会通过短信发送，首次登录后必须修改。",
    "密码改成了什么我不知道，需要问运维。",
    "请输入密码后点击登录。",
    "密码强度检查放在前端和后端各做一次。",
    "开机密码忘了可以用恢复盘重置。",
]

PYTHON = [
    "password: str",
    "password: str | None = None",
    "password: SecretStr = Field(min_length=12)",
    "def login(username: str, password: str) -> Token:",
    "if password is None:\n    raise ValueError('password is required')",
    "if not password:\n    return None",
    "assert password is not None",
    "password = getpass.getpass('Password: ')",
    "password = os.environ['DB_PASSWORD']",
    "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
    "user.password = hash_password(form.password.data)",
    "api_key = settings.api_key",
    "token = request.headers.get('Authorization', '').removeprefix('Bearer ')",
    "secret_key = os.getenv('SECRET_KEY', '')",
    "private_key = serialization.load_pem_private_key(data, password=None)",
    "signing_key = load_key(path)",
    "key = hashlib.sha256(content.encode()).hexdigest()",
    "seed = 42",
    "random.seed(seed)",
    "pw = sync_playwright().start()",
    "pwd = os.getcwd()",
    "digest = hmac.new(key, msg, 'sha256').hexdigest()",
    "class LoginForm(BaseModel):\n    email: EmailStr\n    password: str\n    remember: bool = False",
    "@dataclass\nclass Credentials:\n    username: str\n    password: str\n    api_key: str | None = None",
    "fields = ['username', 'password', 'password_confirmation']",
    "if password != confirm:\n    errors['password'] = 'passwords do not match'",
    "logger.info('password reset requested for user %s', user_id)",
    "encoded = base64.b64encode(data).decode()",
    "print(hashlib.md5(b'hello').hexdigest())  # 5d41402abc4b2a76b9719d911017c592",
    "KEY_SIZE = 32  # bytes, AES-256",
    "token_count = len(tokens)",
    "max_tokens: int = 4096",
]

TYPESCRIPT = [
    "interface Credentials { username: string; password: string; apiKey?: string }",
    "const password: string = form.get('password') ?? '';",
    "if (!password) throw new Error('password is required');",
    "export function hashPassword(password: string): Promise<string> {",
    "const token = req.headers.authorization?.split(' ')[1];",
    "const apiKey = process.env.API_KEY!;",
    "type Options = { pw?: string; timeoutMs: number };",
    "const key = crypto.createHash('sha256').update(body).digest('hex');",
    '<input type="password" name="password" autocomplete="current-password" />',
    '<label for="password">Password</label>',
    "password: z.string().min(12, 'password is too short'),",
    "const secret = await secrets.get('app/secret');",
]

GO_RUST_SHELL = [
    'type Config struct {\n\tPassword string `json:"password"`\n\tAPIKey   string `json:"api_key"`\n}',
    'cfg.Password = os.Getenv("DB_PASSWORD")',
    'if cfg.Password == "" {\n\treturn errors.New("password is required")\n}',
    'let password = std::env::var("PASSWORD").expect("PASSWORD must be set");',
    "pub struct Login { pub username: String, pub password: String }",
    'read -s -p "Password: " password',
    'export PGPASSWORD="$DB_PASSWORD"',
    "ssh-keygen -t ed25519 -C dev@laptop -f ~/.ssh/id_ed25519",
    "gpg --list-secret-keys --keyid-format=long",
    "openssl rand -hex 32 > key.hex",
    "sha256sum dist/app.tar.gz",
    "git rev-parse HEAD",
    'kubectl create secret generic app --from-literal=password="$DB_PASSWORD"',
    "docker login -u ci --password-stdin < token.txt",
    "aws configure get aws_access_key_id --profile dev",
]

CONFIG = [
    "password_min_length: 12",
    "password: ${DB_PASSWORD}",
    'password: "{{ vault_db_password }}"',
    "secret_name: app-secrets",
    "auth_type: oauth2",
    "token_ttl: 3600",
    "private_key_path: ~/.ssh/id_ed25519",
    "pw_hash_rounds: 12",
    "api_key_header: X-Api-Key",
    "key_size: 2048",
    "seed: 1234",
    "signing_key_id: 7f3c2a1b",
]


def _hex_samples() -> list[str]:
    samples = []
    for index in range(12):
        digest = hashlib.sha256(f"release-{index}".encode()).hexdigest()
        sha1 = hashlib.sha1(f"commit-{index}".encode()).hexdigest()
        samples += [
            f"sha256: {digest}",
            f"{digest}  dist/app-{index}.tar.gz",
            f"commit {sha1}",
            f"The build artifact digest is {digest}.",
            f"key fingerprint: {':'.join(sha1[i : i + 2] for i in range(0, 40, 2))}",
            f"00000010: {' '.join(digest[i : i + 2] for i in range(0, 32, 2))}  ................",
        ]
    return samples


_EN_SUBJECTS = [
    "The password",
    "Your password",
    "The admin password",
    "The Wi-Fi password",
    "The root password",
]
_EN_PREDICATES = [
    "is required",
    "is too short",
    "is incorrect",
    "was changed yesterday",
    "is stored in the vault",
    "is hashed before storage",
    "should be rotated regularly",
    "will be emailed to you",
    "is managed by the platform team",
    "is not shown in the logs",
]
_ZH_SUBJECTS = ["密码", "登录密码", "支付密码", "管理员密码", "数据库密码"]
_ZH_PREDICATES = [
    "是必填项",
    "不能为空",
    "是错误的",
    "已经修改过了",
    "存放在保险库里",
    "需要定期更换",
    "会通过邮件发送",
    "由平台团队管理",
    "不会出现在日志里",
    "是用户自己设置的",
]
_CODE_NAMES = ["password", "db_password", "admin_pw", "pwd", "api_key", "secret_key", "token"]
_CODE_FORMS = [
    "{name}: str",
    "{name}: Optional[str] = None",
    "{name} = os.environ['{upper}']",
    "{name} = settings.{name}",
    "if {name} is None:",
    "{name}=${{{upper}}}",
]


def _templated() -> list[str]:
    samples = [f"{s} {p}." for s, p in itertools.product(_EN_SUBJECTS, _EN_PREDICATES)]
    samples += [f"{s}{p}。" for s, p in itertools.product(_ZH_SUBJECTS, _ZH_PREDICATES)]
    samples += [
        form.format(name=name, upper=name.upper())
        for name, form in itertools.product(_CODE_NAMES, _CODE_FORMS)
    ]
    return samples


def ordinary_samples() -> list[tuple[str, str]]:
    """(group, text) pairs; groups: prose-en, prose-zh, code, config, hex, templated."""
    groups = {
        "prose-en": PROSE_EN,
        "prose-zh": PROSE_ZH,
        "code": PYTHON + TYPESCRIPT + GO_RUST_SHELL,
        "config": CONFIG,
        "hex": _hex_samples(),
        "templated": _templated(),
    }
    return [(group, text) for group, texts in groups.items() for text in texts]
