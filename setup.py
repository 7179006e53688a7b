"""The one build step pyproject.toml cannot declare: the wheel carries ``conf/dlprio.yaml`` (the
repository's one copy, the file admins read and copy to /etc/dlprio/) as
``prioritizer/conf/dlprio.yaml``, the packaged config ``dlprio`` reads when
/etc/dlprio/dlprio.yaml is absent (:data:`prioritizer.config_file.PACKAGED_PATH`). Package data
must sit inside a package, and conf/ is none. An editable install reads conf/ in the checkout."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PACKAGED_CONFIG = ("conf/dlprio.yaml", "prioritizer/conf/dlprio.yaml")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            source, target = PACKAGED_CONFIG
            out = Path(self.build_lib, target)
            self.mkpath(str(out.parent))
            self.copy_file(source, str(out))


setup(cmdclass={"build_py": BuildPy})
