# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters chart_images, public_images, image_mirror_pairs and mirrored_image (docs in their .yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

chart = module_utils("gpu_operator.chart_images")


def chart_images(docs, driver_os=None):
    return chart.images([d for d in docs or [] if d], driver_os=tuple(driver_os or ("ubuntu22.04",)))


def public_images(image_list, mirror=None):
    return chart.public(image_list, mirror)


def image_mirror_pairs(upstream_images, mirrored_images):
    return chart.mirror_pairs(upstream_images, mirrored_images)


def mirrored_image(image, mirror=None, layout="path"):
    return chart.mirror_image(image, mirror, layout or "path")


class FilterModule(object):
    def filters(self):
        return {"chart_images": chart_images, "public_images": public_images,
                "image_mirror_pairs": image_mirror_pairs,
                "mirrored_image": mirrored_image}
